-- multi_release.lua: end a multilock's grant on one node, on every key still ours.
--
-- KEYS[1] ... KEYS[n]
--          the exclusive lock keys of the names
-- KEYS[n+1] ... KEYS[2n]
--          optional: their wake-up channels (KEYS[n+i] is KEYS[i]'s), told
--          when that key is released, so waiters of each name retry at once
-- ARGV[1]  token of the grant being released
-- ARGV[2]  n, the number of lock keys
--
-- Returns
--   1  every key held ARGV[1]; all were deleted (and their channels told)
--   0  some key is absent or holds another token (expired, or someone
--      else's grant now): it was left alone, while the keys that still held
--      ARGV[1] were deleted all the same (and their channels told)
-- Errors
--   WRONGTYPE when a key holds a non-string: counts as a failed vote (keys
--   before it may have been deleted; the release is sent again)
--
-- Compare-and-delete per key, as release.lua: a plain DEL could remove the
-- grant of a holder that took the key after ours expired. A key that is not
-- ours any more never stops the others from being released.
local n = tonumber(ARGV[2])
local all = 1
for i = 1, n do
    if redis.call('GET', KEYS[i]) == ARGV[1] then
        redis.call('DEL', KEYS[i])
        local channel = KEYS[n + i]
        if channel then
            local sent = redis.pcall('SPUBLISH', channel, ARGV[1])
            if type(sent) == 'table' and sent.err then
                redis.pcall('PUBLISH', channel, ARGV[1])
            end
        end
    else
        all = 0
    end
end
return all
