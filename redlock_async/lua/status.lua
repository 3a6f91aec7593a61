-- status.lua: one node's view of one lock name, for `redlock-async status`.
--
-- KEYS[1]  exclusive lock: the string holding the grant's token
-- KEYS[2]  read-write lock: the writer's token
-- KEYS[3]  read-write lock: the reader set (sorted set: token -> expiry, server ms)
-- KEYS[4]  read-write lock: the writer-waiting marker
-- KEYS[5]  exclusive lock: the fencing counter
-- KEYS[6]  read-write lock: the writers' fencing counter
-- KEYS[7]  fair exclusive waiters (sorted set: waiter id -> ticket)
-- KEYS[8]  fair read-write waiters (sorted set: waiter id -> ticket)
-- No ARGV.
--
-- Returns {token, token_ttl, writer, writer_ttl, readers, readers_ttl,
--          waiting, fence, rw_fence, queued, rw_queued, live}
--   token        KEYS[1]'s token, or nil when it is free
--   token_ttl    KEYS[1]'s PTTL in ms (-2: no such key)
--   writer       KEYS[2]'s token, or nil
--   writer_ttl   KEYS[2]'s PTTL in ms (-2: no such key)
--   readers      how many readers are live (expiry after now, server clock)
--   readers_ttl  ms the longest-lived of them has left; 0 when none is live
--   waiting      1 when KEYS[4] exists, else 0
--   fence        KEYS[5]'s counter (a string), or nil when never fenced
--   rw_fence     KEYS[6]'s counter (a string), or nil
--   queued       fair exclusive waiters in KEYS[7]
--   rw_queued    fair read-write waiters in KEYS[8]
--   live         the live readers, flat: {token1, ms_left1, token2, ...}
--                (who took each is in its token: _holderinfo.py)
--
-- Reads only: expired readers are counted out, never removed. One script, so
-- every field is from the same instant on this node.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
local readers = #live / 2
local readers_ttl = 0
if readers > 0 then
    readers_ttl = tonumber(live[#live]) - now
end
local left = {}
for i = 1, #live, 2 do
    left[i] = live[i]
    left[i + 1] = tonumber(live[i + 1]) - now
end
return {
    redis.call('GET', KEYS[1]),
    redis.call('PTTL', KEYS[1]),
    redis.call('GET', KEYS[2]),
    redis.call('PTTL', KEYS[2]),
    readers,
    readers_ttl,
    redis.call('EXISTS', KEYS[4]),
    redis.call('GET', KEYS[5]),
    redis.call('GET', KEYS[6]),
    redis.call('ZCARD', KEYS[7]),
    redis.call('ZCARD', KEYS[8]),
    left,
}
