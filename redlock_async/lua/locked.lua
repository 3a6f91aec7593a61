-- locked.lua: is a name held on this node? (Redlock.locked(), read only)
--
-- KEYS[1]  the exclusive lock key
-- No ARGV.
--
-- Returns
--   1  the key exists: a grant holds it (or a foreign key sits there, which
--      blocks acquires just the same)
--   0  the key is absent: an acquire would succeed here now
return redis.call('EXISTS', KEYS[1])
