-- fair_leave.lua: take a waiter out of a fair queue on one node.
--
-- KEYS[1]  the queue (sorted set: waiter id -> ticket)
-- KEYS[2]  the heartbeats (sorted set: waiter id -> expiry, server ms)
-- KEYS[3]  optional: the lock's wake-up channel, told so the next waiter
--          (now perhaps at the head) retries at once
-- ARGV[1]  waiter id
--
-- Returns
--   1  the waiter was queued here and is gone
--   0  it was not queued here
local removed = redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
if removed == 1 and KEYS[3] then
    local sent = redis.pcall('SPUBLISH', KEYS[3], ARGV[1])
    if type(sent) == 'table' and sent.err then
        redis.pcall('PUBLISH', KEYS[3], ARGV[1])
    end
end
return removed
