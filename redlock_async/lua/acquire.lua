-- acquire.lua: try to take an exclusive grant on one node.
--
-- KEYS[1]  the lock key (a string holding the grant's token)
-- KEYS[2]  optional: the fencing counter (an integer, no expiry)
-- ARGV[1]  token: 40 hex characters, unique to this grant
-- ARGV[2]  ttl in milliseconds, an integer > 0
--
-- Returns
--   1  the key was absent and now holds ARGV[1], expiring in ARGV[2] ms
--   n  (with KEYS[2]) the same, and n > 1 is the fencing counter after
--      next_fence (_fence.lua, prepended): this node's candidate token
--   0  the key exists (held by another grant, or a foreign key of any type):
--      nothing was written
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    if KEYS[2] then
        return next_fence(KEYS[2])
    end
    return 1
end
return 0
