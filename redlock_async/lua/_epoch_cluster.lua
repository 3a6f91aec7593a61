-- _epoch_cluster.lua: _epoch.lua's function for Redis Cluster nodes, where
-- the record would lie in another hash slot than the script's keys (Redis
-- refuses the access). It checks and records nothing: a cluster node's
-- restarts are left to the operator (docs/guarantees.md).
--
-- No KEYS, no ARGV of its own: it defines epoch_check (Returns true).
local function epoch_check(record, ttl)
    return true
end
