-- _epoch.lua: the restart check and record, prepended to every script that
-- grants or renews (acquire, extend, the read-write, fair, multi and
-- semaphore scripts) and to census.lua. On a Redis Cluster node,
-- _epoch_cluster.lua follows it and adds a run_id check. The rule and its
-- proof: docs/guarantees.md, "Restarted nodes".
--
-- No KEYS, no ARGV of its own; it uses keys under the library's prefix:
--
--   <prefix>~epoch          a hash, no expiry (beside a Redis Cluster node,
--                           one per hash slot: <prefix>~epoch{tag}):
--       id      this node's epoch: 't', the node's clock (ms, 11 hex
--               digits) when it was made, 4 hex digits more; made by the
--               first script that finds it missing
--       run     the run_id of the server that made ``id``
--       repl    its replication id then (master_replid)
--       <view>  an index of the views with a record below (census.lua)
--   <prefix>~epoch:<view>   a view's record: its expiry outlasts the grants
--                           made or renewed here with that view
--   <prefix>~epoch~notices  a hash, no expiry: "<mark>.<position>" -> the
--                           newest epoch a census heard there; every older
--                           epoch of that position is dead
--
-- A view is "<mark>,e1,e2,...," (ARGV[#ARGV] of the scripts holds its
-- record's key): the caller's node list's mark, then each node's epoch by
-- position, '-' where the caller has not heard it.
--
-- epoch_check(record, ttl)
--   Returns whether the script may go on: this node's epoch is in the view
--   and no notice names an epoch of the view dead. Otherwise the script
--   answers STALE (-9) and does nothing. When it returns true, the view's
--   record lasts at least max(ttl, 2 s) more (set to 1.25 times that when
--   found shorter: written about four times per ttl; the common case is one
--   PTTL, as a record alive here was checked in this epoch).

-- The server answering and its history of data: its run_id (new with every
-- restart) and replication id (new with every promotion, and for a primary
-- failed over and back), or nil when INFO is refused.
local function epoch_run_id()
    local info = redis.pcall('INFO', 'server')
    local run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
    if not run_id then
        return nil, nil
    end
    local replication = redis.pcall('INFO', 'replication')
    local replid = type(replication) == 'string'
        and string.match(replication, 'master_replid:(%x+)') or ''
    return run_id, replid
end

-- A new epoch, made by the server ``run_id``, ``replid``. Its clock comes
-- first, so that a later epoch of this node reads as newer; the rest comes
-- from the run id and the clock (Lua's math.random is seeded alike everywhere).
local function epoch_make(epoch_key, run_id, replid)
    local t = redis.call('TIME')
    local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local seed = (run_id or '') .. ':' .. t[1] .. ':' .. t[2] .. ':' .. epoch_key
    local id = string.format('t%011x', ms) .. string.sub(redis.sha1hex(seed), 1, 4)
    redis.call('HSET', epoch_key, 'id', id, 'run', run_id or '', 'repl', replid or '')
    return id
end

-- Whether the epoch in ``epoch_key`` was made by another server than
-- ``run_id``, ``replid`` (a missing one is not: it is made on first use).
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

-- Whether a notice here names dead an epoch of ``view``: at some position,
-- the view's epoch was made before the notice's (the node has lost its
-- data since). '-' and positions with no notice are never refused.
local function epoch_refused(epoch_key, view)
    local notices = redis.call('HGETALL', epoch_key .. '~notices')
    if #notices == 0 then
        return false
    end
    local mark = string.match(view, '^[^,]*')
    local epochs = {}
    for epoch in string.gmatch(view, ',([^,]+)') do
        epochs[#epochs + 1] = epoch
    end
    for i = 1, #notices, 2 do
        local of, at = string.match(notices[i], '^(.*)%.(%d+)$')
        local mine = of == mark and epochs[tonumber(at)]
        if mine and mine ~= '-' and epoch_born(mine) < epoch_born(notices[i + 1]) then
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
    -- <prefix>~epoch, or <prefix>~epoch{tag} for one hash slot's (_slots.py)
    local epoch_key, view = string.match(record, '^(.*~epoch[^:]*):(.*)$')
    local id = redis.call('HGET', epoch_key, 'id') or epoch_make(epoch_key, epoch_run_id())
    if not string.find(view, ',' .. id .. ',', 1, true) or epoch_refused(epoch_key, view) then
        return false
    end
    redis.call('SET', record, '1', 'PX', need + math.ceil(need / 4))
    redis.call('HSET', epoch_key, view, '1')
    return true
end
