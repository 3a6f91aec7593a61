-- _epoch.lua: the restart check and record, prepended to every script that
-- grants or renews (acquire, extend, the read-write, fair, multi and
-- semaphore scripts). Redis Cluster nodes run _epoch_cluster.lua instead.
--
-- No KEYS, no ARGV of its own. It defines two functions for the script
-- (Returns below) and uses one key outside that
-- script's KEYS, ``<prefix>~epoch`` (the prefix read off KEYS[1]: every key
-- the library writes is ``<prefix>{<name>}...``), a hash with no expiry:
--
--   id      this node's epoch: a random id made by the first script that
--           finds it missing, so a node that lost its data (a restart
--           without persistence, FLUSHALL, eviction) has a new one; a
--           census also makes a new one when the server is not the one
--           that made it (a restart from disk, a promoted replica)
--   run     the run_id of the server that made ``id``
--   <view>  for each view a grant was made or renewed with: until when (the
--           node's clock, ms) those grants may live
--
-- A view (ARGV[#ARGV] of every script here) is the caller's list of the
-- nodes' epochs as a census last read them, ",id1,id2,...,".
--
-- epoch_known(view)
--   Returns whether this node's epoch is in the view. When it is not, the script
--   answers STALE (-9) and does nothing else: the caller has not seen this
--   node since it lost its data, and must read every node's records (a
--   census, census.lua) before this node's yes may count.
-- epoch_raise(view, ttl)
--   After a yes: the field ``view`` lasts at least max(ttl, 2 s) more. Found
--   short, it is raised to now + 1.25 times that, so a steady stream of
--   grants writes it about four times per ttl, not once per grant.
--
-- Why (the proof is in docs/guarantees.md): a grant still valid was last
-- written on a quorum with some view V, and every yes voter raised V to
-- outlive it. A node Y that lost it has a new epoch, not in V; V holds Y's
-- old epoch, which no node has any more. A census that finds such a V on
-- any node keeps Y's votes out until V has expired.
local epoch_key = string.match(KEYS[1], '^[^{]*') .. '~epoch'
local epoch_now = nil -- the node's clock in ms, read once per script run
local epoch_raised = {} -- ttls raised by this run (extend_many renews many grants)

local function epoch_id()
    local id = redis.call('HGET', epoch_key, 'id')
    if id then
        return id
    end
    -- The run id and the clock make it unique: Lua's math.random is
    -- seeded alike on every node, so it would not be.
    local info = redis.pcall('INFO', 'server')
    local run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or ''
    local t = redis.call('TIME')
    id = string.sub(redis.sha1hex(run_id .. ':' .. t[1] .. ':' .. t[2] .. ':' .. epoch_key), 1, 16)
    redis.call('HSET', epoch_key, 'id', id, 'run', run_id)
    return id
end

local function epoch_known(view)
    return string.find(view, ',' .. epoch_id() .. ',', 1, true) ~= nil
end

local function epoch_prune(now)
    -- Many views at once (clients that learned of restarts one by one):
    -- drop the expired ones. Live ones stay, however many: each guards grants.
    local all = redis.call('HGETALL', epoch_key)
    for i = 1, #all, 2 do
        local ends = tonumber(all[i + 1])
        if all[i] ~= 'id' and all[i] ~= 'run' and (ends == nil or ends <= now) then
            redis.call('HDEL', epoch_key, all[i])
        end
    end
end

local function epoch_raise(view, ttl)
    if epoch_raised[ttl] then
        return
    end
    epoch_raised[ttl] = true
    if epoch_now == nil then
        local t = redis.call('TIME')
        epoch_now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    -- Two seconds at the least: a node that lost its data then resumes its
    -- fencing counters at a clock past every token handed out before (docs/fencing.md).
    local ms = math.max(tonumber(ttl), 2000)
    local ends = tonumber(redis.call('HGET', epoch_key, view))
    if ends ~= nil and ends >= epoch_now + ms then
        return
    end
    redis.call('HSET', epoch_key, view, string.format('%.0f', epoch_now + ms + math.ceil(ms / 4)))
    if ends == nil and redis.call('HLEN', epoch_key) > 8 then
        epoch_prune(epoch_now)
    end
end
