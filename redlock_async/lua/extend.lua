-- extend.lua: renew a grant on one node, only if it is still ours.
--
-- KEYS[1]  the lock key
-- ARGV[1]  token of the grant being renewed
-- ARGV[2]  new ttl in milliseconds from now, an integer > 0
--
-- Returns
--   1  the key held ARGV[1]; its expiry is now ARGV[2] ms from now
--   0  the key is absent or holds another token: nothing was touched
-- Errors
--   WRONGTYPE when KEYS[1] holds a non-string: counts as a failed vote
--
-- PEXPIRE on an existing key only: renewal must never re-create an expired
-- key, since another client may legitimately hold the lock by now.
if redis.call('GET', KEYS[1]) == ARGV[1] then
    redis.call('PEXPIRE', KEYS[1], ARGV[2])
    return 1
end
return 0
