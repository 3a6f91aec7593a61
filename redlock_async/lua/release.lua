-- release.lua: end a grant on one node, only if it is still ours.
--
-- KEYS[1]  the lock key
-- ARGV[1]  token of the grant being released
--
-- Returns
--   1  the key held ARGV[1] and was deleted
--   0  the key is absent or holds another token (expired, or someone else's
--      grant now): nothing was touched
-- Errors
--   WRONGTYPE when KEYS[1] holds a non-string: counts as a failed vote
--
-- Compare-and-delete must be atomic: a plain DEL could remove the grant of a
-- holder that took the key after ours expired.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
end
return 0
