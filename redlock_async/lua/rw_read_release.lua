-- rw_read_release.lua: leave the readers of a read-write lock on one node.
--
-- KEYS[1]  reader set (sorted set: reader token -> expiry, server ms)
-- KEYS[2]  optional: the lock's wake-up channel (see release.lua); told when
--          the last reader leaves, since only then can a writer get in
-- ARGV[1]  token of the read grant
--
-- Returns
--   1  the token was a live reader and was removed
--   0  it was not there, or had already expired: nothing of others touched
--
-- Expired entries are pruned first; an empty set is deleted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then
    redis.call('DEL', KEYS[1])
    if removed == 1 and KEYS[2] then
        local sent = redis.pcall('SPUBLISH', KEYS[2], ARGV[1])
        if type(sent) == 'table' and sent.err then
            redis.pcall('PUBLISH', KEYS[2], ARGV[1])
        end
    end
end
return removed
