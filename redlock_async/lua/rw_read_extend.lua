-- rw_read_extend.lua: renew one reader of a read-write lock on one node.
--
-- KEYS[1]  reader set (sorted set: reader token -> expiry, server ms)
-- ARGV[1]  token of the read grant
-- ARGV[2]  new ttl in milliseconds from now, an integer > 0
--
-- Returns
--   1  the token was a live reader; its expiry is now ARGV[2] ms from now
--   0  it is gone or expired: nothing was touched (never re-created)
--
-- Renews only this reader, never the others in the set; the set's own expiry
-- is raised to cover it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then
    return 0
end
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[1]) < ttl then
    redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
