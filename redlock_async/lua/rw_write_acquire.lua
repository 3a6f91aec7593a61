-- rw_write_acquire.lua: try to take the writer side of a read-write lock.
--
-- KEYS[1]  writer key (string: the writer's token)
-- KEYS[2]  reader set (sorted set: reader token -> expiry, server ms)
-- KEYS[3]  writer-waiting marker (string: a waiting writer's id)
-- ARGV[1]  token of this write grant
-- ARGV[2]  ttl in milliseconds, an integer > 0
-- ARGV[3]  id of the waiting writer (stable across its attempts)
-- KEYS[4]  optional: the fencing counter (an integer, no expiry)
-- ARGV[4]  marker ttl in milliseconds: how long the marker outlives a writer
--          that stops retrying (it is renewed by every attempt)
--
-- Returns
--    1  granted: KEYS[1] holds ARGV[1] for ARGV[2] ms; our marker is removed
--    n  (with KEYS[4]) granted, n > 1 being the counter after next_fence
--       (_fence.lua, prepended)
--    0  refused: another writer holds the lock
--   -1  refused: readers hold the lock; the marker now names this writer
--       (or another waiting writer), so no new reader joins meanwhile
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
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) > 0 then
    local waiting = redis.call('GET', KEYS[3])
    if waiting == false or waiting == ARGV[3] then
        redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
    end
    return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if redis.call('GET', KEYS[3]) == ARGV[3] then
    redis.call('DEL', KEYS[3])
end
if KEYS[4] then
    return next_fence(KEYS[4])
end
return 1
