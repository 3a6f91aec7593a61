-- server_id.lua: which server process answers, for restart detection.
--
-- No KEYS, no ARGV. Sent in the same pipeline as each granting script when
-- a node is reached through redis-py (which reconnects on its own, so a
-- restart can only be seen by asking). Parsing INFO here keeps the reply to
-- two fields: redis-py's own INFO parser cost ~35 us per call, per node.
--
-- Returns {run_id, uptime_in_seconds}
local info = redis.call('INFO', 'server')
return {
    string.match(info, 'run_id:(%x+)') or '',
    tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0,
}
