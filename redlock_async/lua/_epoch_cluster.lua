-- _epoch_cluster.lua: _epoch.lua's functions for Redis Cluster nodes, where
-- the record would lie in another hash slot than the script's keys (Redis
-- refuses the access). They check and record nothing: a cluster node's
-- restarts are left to the run_id watch and the operator (docs/guarantees.md).
--
-- No KEYS, no ARGV of its own: it defines epoch_known (Returns true) and
-- epoch_raise (returns nothing).
local function epoch_known(view)
    return true
end

local function epoch_raise(view, ttl)
end
