-- fence_raise.lua: write a grant's fencing token back to one node's counter.
--
-- KEYS[1]  the key holding the grant (lock key, or an rwlock's writer key)
-- KEYS[2]  the fencing counter (an integer, no expiry)
-- ARGV[1]  token of the grant
-- ARGV[2]  the fencing token chosen for the grant (the highest counter any
--          granting node returned)
--
-- Returns
--   1  the grant is still here and the counter is now >= ARGV[2]
--   0  the grant is not here (expired or someone else's): nothing touched
--
-- Raising the counters of a quorum to the chosen token is what keeps tokens
-- monotonic: any later grant's quorum shares a node with this one.
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return 0
end
-- Compared as numbers (exact below 2^53), stored as the client's decimal
-- string: a Lua number would be written as "1.7e+15", which INCR rejects.
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if current < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[2])
end
return 1
