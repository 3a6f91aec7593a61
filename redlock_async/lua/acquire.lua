-- acquire.lua: try to take an exclusive grant on one node.
--
-- KEYS[1]  the lock key (a string holding the grant's token)
-- ARGV[1]  token: 40 hex characters, unique to this grant
-- ARGV[2]  ttl in milliseconds, an integer > 0
--
-- Returns
--   1  the key was absent and now holds ARGV[1], expiring in ARGV[2] ms
--   0  the key exists (held by another grant, or a foreign key of any type):
--      nothing was written
--
-- SET NX PX does the whole job atomically; it lives in a script so that later
-- steps (fencing counters, queue checks) can join it without another round trip.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
    return 1
end
return 0
