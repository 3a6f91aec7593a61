-- multi_extend.lua: renew a multilock's grant on one node, only if every key is still ours.
--
-- KEYS[1] ... KEYS[n]
--          the exclusive lock keys of the names
-- ARGV[1]  token of the grant being renewed
-- ARGV[2]  new ttl in milliseconds from now, an integer > 0
--
-- Returns
--   1  every key held ARGV[1]; each now expires no sooner than ARGV[2] ms
--      from now (raised to that, or already later)
--   0  some key is absent or holds another token: NOTHING was touched, not
--      even the keys still ours
-- Errors
--   WRONGTYPE when a key holds a non-string: counts as a failed vote
--
-- All or none, like the acquire: this node vouches for the whole set or for
-- none of it. A node that lost one name can no longer count toward the
-- grant, so keeping its other keys alive would only block other clients
-- from those names until they expire; left alone, they expire on their old
-- schedule. PEXPIRE on existing keys only: renewal never re-creates a key.
-- Each key's expiry is only ever raised, never lowered, as in extend.lua
-- (which says why): another live copy of the grant may have asked for a
-- later one and report the set held until then.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
for i = 1, #KEYS do
    if redis.call('GET', KEYS[i]) ~= ARGV[1] then
        return 0
    end
end
local ttl = tonumber(ARGV[2])
for i = 1, #KEYS do
    if redis.call('PTTL', KEYS[i]) < ttl then
        redis.call('PEXPIRE', KEYS[i], ARGV[2])
    end
end
return 1
