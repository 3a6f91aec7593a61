-- multi_acquire.lua: take an exclusive grant on several names at once, on one node.
--
-- KEYS[1] ... KEYS[n]
--          the exclusive lock keys of the names (sorted, no duplicates): the
--          same keys plain locks of those names use, so each excludes the other
-- ARGV[1]  token: "m:" and 40 hex characters, unique to this grant, written to
--          every key (the mark tells adopt() it is no plain lock's token)
-- ARGV[2]  ttl in milliseconds, an integer > 0
--
-- Returns
--   1  every key was absent and now holds ARGV[1], expiring in ARGV[2] ms
--   0  at least one key exists (another grant, or a foreign key of any type):
--      nothing was written
--
-- All or none on this node: every key is checked before any is written, and
-- a script runs atomically, so no other client ever sees part of the set
-- taken here. A refused attempt therefore holds nothing while its client
-- waits to retry: no multilock can wait while holding, hence no deadlock
-- between overlapping multilocks, in whatever order they name their keys.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
for i = 1, #KEYS do
    if redis.call('EXISTS', KEYS[i]) == 1 then
        return 0
    end
end
for i = 1, #KEYS do
    redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
