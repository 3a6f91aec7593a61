-- extend.lua: renew a grant on one node, only if it is still ours.
--
-- KEYS[1]  the lock key
-- ARGV[1]  token of the grant being renewed
-- ARGV[2]  new ttl in milliseconds from now, an integer > 0
--
-- Returns
--   1  the key holds ARGV[1] and now expires no sooner than ARGV[2] ms from
--      now: its expiry was raised to that, or was already later
--   0  the key is absent or holds another token: nothing was touched
-- Errors
--   WRONGTYPE when KEYS[1] holds a non-string: counts as a failed vote
--
-- PEXPIRE on an existing key only: renewal must never re-create an expired
-- key, since another client may legitimately hold the lock by now.
--
-- Only ever raised, never lowered: several live copies of one grant may
-- renew it (adopt(), or extend(ttl=30) then extend(ttl=1)), and each
-- reports a validity up to the expiry it asked for. A renewal that cut the
-- key back would free the name while another copy still reports it held.
-- So the key outlives the latest expiry any copy asked for, and each copy's
-- own validity (counted from before its send) stays a lower bound. PTTL is
-- compared here because PEXPIRE ... GT needs Redis 7. A key without an
-- expiry (PTTL -1: never written so by this library) is given one, so that
-- no grant's key can outlive every holder.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
if redis.call('GET', KEYS[1]) == ARGV[1] then
    if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
    end
    return 1
end
return 0
