-- holder.lua: who holds a name on this node? (Redlock.holder(), read only)
--
-- KEYS[1]  the exclusive lock key (a plain lock's or a multilock's token)
-- KEYS[2]  read-write lock: the writer key (the writer's token)
-- KEYS[3]  read-write lock: the reader set (sorted set: token -> expiry, server ms)
-- No ARGV.
--
-- Returns {token, token_ttl, writer, writer_ttl, readers}
--   token       KEYS[1]'s value, or nil when the key is absent
--   token_ttl   KEYS[1]'s PTTL in ms (-2: no such key, -1: no expiry)
--   writer      KEYS[2]'s value, or nil
--   writer_ttl  KEYS[2]'s PTTL in ms
--   readers     the live readers (expiry after now, on the server's clock),
--               flat: {token1, ms_left1, token2, ms_left2, ...}
-- Errors
--   WRONGTYPE when a key holds another type: counts as a failed answer
--
-- Who took each grant is in its token (see _holderinfo.py): nothing but the
-- grants' own keys is read. Reads only: expired readers are skipped, never
-- removed. One script, so every field is from the same instant on this node.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. now, '+inf', 'WITHSCORES')
local readers = {}
for i = 1, #live, 2 do
    readers[i] = live[i]
    readers[i + 1] = tonumber(live[i + 1]) - now
end
return {
    redis.call('GET', KEYS[1]),
    redis.call('PTTL', KEYS[1]),
    redis.call('GET', KEYS[2]),
    redis.call('PTTL', KEYS[2]),
    readers,
}
