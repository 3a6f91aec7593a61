-- _epoch_cluster.lua: appended to _epoch.lua in the scripts a Redis Cluster
-- node runs (redlock_async/_engine/_slots.py). Beside a cluster the epoch and
-- records are kept per hash slot, in the slot of the script's keys, and the
-- client has no per-shard restart watch (an INFO it sends answers for an
-- arbitrary shard): so the check also compares the server's run_id and
-- replication id with the ones that made the slot's epoch (epoch_run_id,
-- _epoch.lua). A shard restarted from disk, a replica promoted by a
-- failover, or a primary failed over and back, has that epoch in its data
-- but may lack the last grants; it answers STALE (does nothing) until a
-- census gives it a new epoch (census.lua). Plain nodes beside the cluster
-- keep their watch.
--
-- No KEYS, no ARGV of its own: it wraps epoch_check (same arguments).
-- Returns false (the script answers STALE) when the slot's epoch was made
-- by another server, or by this one before a promotion (epoch_foreign),
-- else what _epoch.lua's check returns; raises an error, before any write,
-- when INFO is refused (an ACL without +info): restarts cannot be told
-- then (docs/security.md).
local epoch_check_view = epoch_check
local function epoch_check(record, ttl)
    local run_id, replid = epoch_run_id()
    if not run_id then
        return error({err = 'NOINFO restart detection needs INFO (grant the ACL user +info)'})
    end
    if epoch_foreign(string.match(record, '^(.*~epoch[^:]*):'), run_id, replid) then
        return false
    end
    return epoch_check_view(record, ttl)
end
