-- _epoch.lua: the restart check and record (docs/guarantees.md, "Restarted
-- nodes"), prepended to every script that grants or renews and to census.lua;
-- on a Redis Cluster node, _epoch_cluster.lua follows it. No KEYS, no ARGV of
-- its own; its keys (docs/keys.md), spelled from the record key it is given:
--   <prefix>~epoch          hash, no expiry (<prefix>~epoch{tag} per hash slot
--                           beside a Redis Cluster): id (this node's epoch),
--                           run and repl (the server that made it), and an
--                           index of the records below (for census.lua)
--   <prefix>~epoch:<view>   a view's record, outlasting the grants written with it
--   <prefix>~epoch~newest   hash, no expiry (the notices; not the first version's
--                           ~notices): "<mark>.<position>" -> the newest epoch
--                           a census heard there (older ones are dead)
-- A view, "<mark>,e1,-,e3,": each node's epoch by position, '-' not heard.
--
-- epoch_check(record, ttl) Returns whether the script may go on (else it
-- answers STALE, -9, and does nothing): this node's epoch is in the view and
-- no notice names one of its epochs dead. The record then lasts max(ttl, 2 s)
-- more at least (1.25 times that when shorter: mostly one PTTL, as a live
-- record was checked in this epoch).

-- The server's run_id and replication id (nil: INFO refused).
local function epoch_run_id()
    local info = redis.pcall('INFO', 'server')
    local run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
    if not run_id then
        return nil, nil
    end
    local replication = redis.pcall('INFO', 'replication')
    return run_id, type(replication) == 'string'
        and string.match(replication, 'master_replid:(%x+)') or ''
end

-- A new epoch: 't', the clock in ms as 11 hex digits (``floor`` at least),
-- so that a later one reads as newer, then 4 more (not math.random: it is
-- seeded alike everywhere). Who made it is left out when INFO was refused
-- (an empty run would read as another server's: epoch_foreign).
local function epoch_make(epoch_key, run_id, replid, floor)
    local t = redis.call('TIME')
    local ms = math.max(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), floor or 0)
    local seed = (run_id or '') .. ':' .. t[1] .. ':' .. t[2] .. ':' .. epoch_key
    local id = string.format('t%011x', ms) .. string.sub(redis.sha1hex(seed), 1, 4)
    redis.call('HSET', epoch_key, 'id', id)
    if run_id then
        redis.call('HSET', epoch_key, 'run', run_id, 'repl', replid)
    end
    return id
end

-- Whether the epoch was made by another server (a missing one is not).
local function epoch_foreign(epoch_key, run_id, replid)
    -- Two HGETs, not an HMGET: the documented ACL rule lists HGET (security.md).
    local run = redis.call('HGET', epoch_key, 'run')
    if run and run ~= run_id then
        return true
    end
    local repl = redis.call('HGET', epoch_key, 'repl')
    return repl and repl ~= replid or false
end

-- When an epoch was made, on its node's clock (0: an earlier release's id).
local function epoch_born(epoch)
    return string.sub(epoch, 1, 1) == 't' and tonumber(string.sub(epoch, 2, 12), 16) or 0
end

-- Whether a notice names dead an epoch of ``view``: older than its own (one
-- the view holds elsewhere is another node's: a list in another order).
local function epoch_refused(epoch_key, view)
    local notices = redis.call('HGETALL', epoch_key .. '~newest')
    local mark, epochs = string.match(view, '^[^,]*'), {}
    for epoch in string.gmatch(view, ',([^,]+)') do
        epochs[#epochs + 1] = epoch
    end
    for i = 1, #notices, 2 do
        local of, at = string.match(notices[i], '^(.*)%.(%d+)$')
        local mine = of == mark and epochs[tonumber(at)]
        if mine and mine ~= '-' and epoch_born(mine) < epoch_born(notices[i + 1])
            and not string.find(view, ',' .. notices[i + 1] .. ',', 1, true) then
            return true
        end
    end
    return false
end

local function epoch_check(record, ttl)
    local need = math.max(tonumber(ttl), 2000)
    if redis.call('PTTL', record) >= need then
        return true
    end
    local epoch_key, view = string.match(record, '^(.*~epoch[^:]*):(.*)$')
    local id = redis.call('HGET', epoch_key, 'id') or epoch_make(epoch_key, epoch_run_id())
    if not string.find(view, ',' .. id .. ',', 1, true) or epoch_refused(epoch_key, view) then
        return false
    end
    redis.call('SET', record, '1', 'PX', need + math.ceil(need / 4))
    redis.call('HSET', epoch_key, view, '1')
    return true
end
