-- _epoch.lua: the restart check and record, prepended to every script that
-- grants or renews (acquire, extend, the read-write, fair, multi and
-- semaphore scripts). On a Redis Cluster node, _epoch_cluster.lua follows it
-- and adds a run_id check.
--
-- No KEYS, no ARGV of its own: it defines epoch_check for the script
-- (Returns below; census.lua, which it is prepended to as well, uses
-- epoch_make, epoch_run_id and epoch_foreign), and uses keys outside that script's KEYS, under the
-- library's prefix:
--
--   <prefix>~epoch          a hash with no expiry (beside a Redis Cluster node,
--                           one per hash slot: <prefix>~epoch{tag}, where the
--                           tag hashes to the slot; redlock_async/_engine/_slots.py):
--       id      this node's epoch: a random id made by the first script that
--               finds it missing, so a node that lost its data (a restart
--               without persistence, FLUSHALL, eviction) has a new one; a
--               census also makes a new one when the server is not the one
--               that made it (a restart from disk, a promoted replica, a
--               primary failed over and back)
--       run     the run_id of the server that made ``id``
--       repl    its replication id then (master_replid; epoch_run_id below)
--       born    this node's clock (ms) when ``id`` was made: a census tells
--               its age (census.lua)
--       <view>  an index of the views with a record below (census.lua)
--   <prefix>~epoch:<view>   a view's record: a string whose expiry says how
--                           long grants made or renewed here with that view
--                           may live
--   <prefix>~epoch~notices  a hash, no expiry: the epochs a census heard,
--                           written by the census sent once it had finished,
--                           with this node's clock then (epoch_noticed)
--
-- A view is the caller's list of the nodes' epochs as a census last read
-- them, ",id1,id2,...,"; every script here gets its record's key,
-- ``<prefix>~epoch:<view>``, as ARGV[#ARGV] (spelled once per view by the
-- client: the common case then costs one PTTL and nothing else).
--
-- epoch_check(record, ttl)
--   Returns whether this node's epoch is in the view. When it is not, the
--   script answers STALE (-9) and does nothing else: the caller has not seen
--   this node since it lost its data, and must read every node's records (a
--   census, census.lua) before this node's yes may count. When it is, the
--   view's record lasts at least max(ttl, 2 s) more: found shorter, it is
--   set to 1.25 times that, so a steady stream of grants writes it about
--   four times per ttl. The common case is one PTTL: a record alive here
--   was made in this epoch, after the check (a census that makes a new
--   epoch deletes them all). A view that must write its record also passes
--   the notices (epoch_noticed): one refusing it answers STALE.
--
-- Why (the proof is in docs/guarantees.md): a grant still valid was last
-- written on a quorum with some view V, and every node of it that voted
-- checked V and raised V's record to outlive the grant. A node Y that lost
-- the grant has a new epoch, not in V; V holds Y's old epoch, which no node
-- has any more. A census that finds V's record on any node keeps Y's votes
-- out until it has expired. Two seconds at the least: a node that lost its
-- data then resumes its fencing counters at a clock past every token handed
-- out before (docs/fencing.md).
-- Which server answers, and with which history of data: its run_id (new
-- with every restart) and replication id (new with every promotion), or
-- nil when INFO is refused (an ACL without +info). A primary failed over
-- and back keeps its run_id, yet as a replica in between it may have
-- dropped the writes it had not passed on (its last grants): its
-- replication id is new. (A primary left without replicas for
-- repl-backlog-ttl gets a new one too: one census's new epoch, no more.)
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

-- A new epoch for this node, made by the server ``run_id``, ``replid``
-- (census.lua uses it too).
local function epoch_make(epoch_key, run_id, replid)
    -- The run id and the clock make it unique: Lua's math.random is seeded
    -- alike on every node, so it would not be.
    local t = redis.call('TIME')
    local seed = (run_id or '') .. ':' .. t[1] .. ':' .. t[2] .. ':' .. epoch_key
    local id = string.sub(redis.sha1hex(seed), 1, 16)
    local born = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    redis.call('HSET', epoch_key, 'id', id, 'run', run_id or '', 'repl', replid or '', 'born', born)
    return id
end

-- Whether the epoch in ``epoch_key`` was made by another server than
-- ``run_id``, ``replid``, or by this one before a promotion. An epoch made
-- before the replication id was kept (no ``repl`` field) is judged by its
-- run_id alone; a missing epoch is not foreign (it is made on first use).
local function epoch_foreign(epoch_key, run_id, replid)
    -- Two HGETs, not an HMGET: the documented ACL rule lists HGET (security.md).
    local run = redis.call('HGET', epoch_key, 'run')
    if run and run ~= run_id then
        return true
    end
    local repl = redis.call('HGET', epoch_key, 'repl')
    return repl and repl ~= replid or false
end

-- The node's clock in whole milliseconds.
local function epoch_now()
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Whether ``view`` and a notice's ``heard`` (both ",id1,id2,...,") each
-- hold an epoch the other lacks. A view made before some node lost its data
-- holds that node's old epoch, which no census hears any more, and lacks
-- its new one, which the notice's census heard. A view that only lacks
-- epochs (a node its census did not hear) or only adds some (a node the
-- notice's did not hear) is no older than the notice.
local function epoch_incomparable(view, heard)
    local lacks = false
    for epoch in string.gmatch(heard, '[^,]+') do
        if not string.find(view, ',' .. epoch .. ',', 1, true) then
            lacks = true
            break
        end
    end
    if not lacks then
        return false
    end
    for epoch in string.gmatch(view, '[^,]+') do
        if not string.find(heard, ',' .. epoch .. ',', 1, true) then
            return true
        end
    end
    return false
end

-- Whether a notice younger than 1.5 x ``need`` ms refuses ``view``.
-- <epoch_key>~notices is a hash: each field the epochs one census heard,
-- its value this node's clock (ms) when the census sent once that one had
-- finished wrote it here (census.lua). A grant or renewal sent before some node lost its
-- data, and written here only after such a census read this node, carries
-- a view incomparable with the notice: refused, it cannot complete a quorum
-- with the lost node's earlier yes that the census could not see (the
-- straddle, docs/guarantees.md). It can only count if it lands within its
-- own ttl of being sent, so a notice matters for that long at most. The
-- window is half a need more: a record raised past a notice's window is
-- then too short for a later grant with that view to skip the check.
local function epoch_noticed(epoch_key, view, need)
    local notices = redis.call('HGETALL', epoch_key .. '~notices')
    if #notices == 0 then
        return false
    end
    local now = epoch_now()
    local window = need + math.ceil(need / 2)
    for i = 1, #notices, 2 do
        if now - tonumber(notices[i + 1]) < window and epoch_incomparable(view, notices[i]) then
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
    if not string.find(view, ',' .. id .. ',', 1, true) then
        return false
    end
    if epoch_noticed(epoch_key, view, need) then
        return false
    end
    redis.call('SET', record, '1', 'PX', need + math.ceil(need / 4))
    redis.call('HSET', epoch_key, view, '1')
    return true
end
