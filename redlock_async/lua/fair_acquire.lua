-- fair_acquire.lua: take a grant in arrival order (fair=True) on one node.
--
-- KEYS[1]  the lock key: exclusive lock key, or an rwlock's writer key
-- KEYS[2]  an rwlock's reader set (for an exclusive lock: a key never written)
-- KEYS[3]  the queue (sorted set: waiter id -> ticket)
-- KEYS[4]  the heartbeats (sorted set: waiter id -> expiry, server ms)
-- KEYS[5]  optional: the fencing counter (exclusive and writer grants)
-- ARGV[1]  token of this grant
-- ARGV[2]  ttl in milliseconds, an integer > 0
-- ARGV[3]  waiter id, prefixed with its kind: "x:" exclusive, "r:" reader,
--          "w:" writer (stable across the waiter's attempts)
-- ARGV[4]  ticket: the waiter's start time in ms; ties are broken by the id,
--          so every node orders the same waiters the same way
-- ARGV[5]  heartbeat in milliseconds: an entry not refreshed for that long is
--          a crashed waiter and is dropped
--
-- Returns
--    1  granted, and the waiter left the queue
--    n  (with KEYS[5], not for readers) granted; n > 1 is the counter after
--       next_fence (_fence.lua, prepended)
--    0  refused: the lock (or writer side) is held
--   -1  refused: readers hold the lock (a writer at the head waits for them)
--   -2  refused: not this waiter's turn (someone queued earlier)
--
-- Every call enqueues the waiter (if new) and refreshes its heartbeat, and
-- prunes dead waiters, so a node that missed an enqueue catches up on the
-- next attempt. A reader may join when no writer is queued ahead of it.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local id, hb = ARGV[3], tonumber(ARGV[5])
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
for _, gone in ipairs(dead) do
    redis.call('ZREM', KEYS[3], gone)
    redis.call('ZREM', KEYS[4], gone)
end
redis.call('ZADD', KEYS[3], 'NX', ARGV[4], id)
redis.call('ZADD', KEYS[4], now + hb, id)
for i = 3, 4 do
    if redis.call('PTTL', KEYS[i]) < hb then
        redis.call('PEXPIRE', KEYS[i], hb)
    end
end
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
local kind = string.sub(id, 1, 2)
local ttl = tonumber(ARGV[2])
if kind == 'r:' then
    local rank = redis.call('ZRANK', KEYS[3], id)
    if rank > 0 then
        for _, ahead in ipairs(redis.call('ZRANGE', KEYS[3], 0, rank - 1)) do
            if string.sub(ahead, 1, 2) == 'w:' then
                return -2
            end
        end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
    redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
    if redis.call('PTTL', KEYS[2]) < ttl then
        redis.call('PEXPIRE', KEYS[2], ttl)
    end
else
    if redis.call('ZRANGE', KEYS[3], 0, 0)[1] ~= id then
        return -2
    end
    if kind == 'w:' then
        redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
        if redis.call('ZCARD', KEYS[2]) > 0 then
            return -1
        end
    end
    redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
end
redis.call('ZREM', KEYS[3], id)
redis.call('ZREM', KEYS[4], id)
if KEYS[5] and kind ~= 'r:' then
    return next_fence(KEYS[5])
end
return 1
