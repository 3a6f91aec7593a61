-- rw_read_extend.lua: renew one reader of a read-write lock on one node.
--
-- KEYS[1]  reader set (sorted set: reader token -> expiry, server ms)
-- ARGV[1]  token of the read grant
-- ARGV[2]  new ttl in milliseconds from now, an integer > 0
--
-- Returns
--   1  the token was a live reader; it now expires no sooner than ARGV[2] ms
--      from now (its score raised to that, or already later)
--   0  it is gone or expired: nothing was touched (never re-created)
--
-- Renews only this reader, never the others in the set; the set's own expiry
-- is raised to cover it. Both are only ever raised, never lowered: another
-- live copy of this read grant may have asked for a later expiry and report
-- it held until then (extend.lua says why). Compared in Lua, as ZADD GT needs
-- Redis 6.2.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score == false then
    return 0
end
if tonumber(score) < now + ttl then
    redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
end
if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
