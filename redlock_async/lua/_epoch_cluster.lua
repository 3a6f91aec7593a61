-- _epoch_cluster.lua: after _epoch.lua on a Redis Cluster node, which has no
-- per-shard restart watch (redlock_async/_engine/_slots.py). No KEYS, no ARGV.
-- Returns what epoch_check returns, and false (STALE) while the slot's epoch
-- was made by another server (epoch_foreign: a restart from disk, a promoted
-- replica, a primary failed over and back), until a census makes a new one;
-- raises NOINFO, before any write, when INFO is refused (docs/security.md).
local epoch_check_view = epoch_check
local function epoch_check(record, ttl)
    local run_id, replid = epoch_run_id()
    if not run_id then
        return error({err = 'NOINFO restart detection needs INFO (grant the ACL user +info)'})
    end
    return not epoch_foreign(string.match(record, '^(.*~epoch[^:]*):'), run_id, replid)
        and epoch_check_view(record, ttl)
end
