-- rw_read_acquire.lua: join the readers of a read-write lock on one node.
--
-- KEYS[1]  writer key (string: the writer's token)
-- KEYS[2]  reader set (sorted set: member = reader token, score = expiry in
--          server milliseconds)
-- KEYS[3]  writer-waiting marker (string: a waiting writer's id)
-- ARGV[1]  token of this read grant
-- ARGV[2]  ttl in milliseconds, an integer > 0
--
-- Returns
--    1  joined: ARGV[1] is in the reader set, expiring ARGV[2] ms from now
--    0  refused: a writer holds the lock
--   -1  refused: a writer is waiting (new readers stand back, so writers
--       are not starved)
--
-- Expiry scores come from the server's own clock (TIME), never the client's,
-- so client clock skew cannot keep a dead reader alive or drop a live one.
-- The set itself expires no earlier than its longest reader, so a crashed
-- reader leaves nothing behind for good.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
    return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
if redis.call('PTTL', KEYS[2]) < ttl then
    redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
