-- _epoch_cluster.lua: appended to _epoch.lua on a Redis Cluster node
-- (redlock_async/_engine/_slots.py), which has no per-shard restart watch:
-- the check also answers STALE (false) when the slot's epoch was made by
-- another server (epoch_foreign: a restart from disk, a promoted replica, a
-- primary failed over and back), until a census gives it a new one; and
-- raises an error, before any write, when INFO is refused (docs/security.md).
-- No KEYS, no ARGV of its own; Returns what epoch_check returns.
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
