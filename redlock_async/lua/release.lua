-- release.lua: end a grant on one node, only if it is still ours.
--
-- KEYS[1]  the key holding the grant (lock key, rwlock writer key, or the
--          writer-waiting marker)
-- KEYS[2]  optional: the lock's wake-up channel (same hash slot); waiters
--          subscribed to it retry at once instead of polling
-- ARGV[1]  token of the grant being released
--
-- Returns
--   1  the key held ARGV[1] and was deleted (and KEYS[2], if given, was told)
--   0  the key is absent or holds another token (expired, or someone else's
--      grant now): nothing was touched, nobody told
-- Errors
--   WRONGTYPE when KEYS[1] holds a non-string: counts as a failed vote
--
-- Compare-and-delete must be atomic: a plain DEL could remove the grant of a
-- holder that took the key after ours expired. The notice uses sharded
-- pub/sub (SPUBLISH, Redis >= 7, slot-local on a cluster) and falls back to
-- PUBLISH on older servers; it is a hint, so its failure never fails the
-- release.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('DEL', KEYS[1])
    if KEYS[2] then
        local sent = redis.pcall('SPUBLISH', KEYS[2], ARGV[1])
        if type(sent) == 'table' and sent.err then
            redis.pcall('PUBLISH', KEYS[2], ARGV[1])
        end
    end
    return 1
end
return 0
