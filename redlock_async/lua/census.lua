-- census.lua: this node's epoch and restart records, read when a client must
-- judge nodes it has not seen since they lost their data
-- (redlock_async/_engine/_epochs.py).
--
-- KEYS[1]  ``<prefix>~epoch`` (_epoch.lua)
-- ARGV[1]  optional: the epochs the caller's last census heard, when this
--          one was sent once that one had finished (",id1,id2,...,"):
--          written here as a notice, with this node's clock (epoch_noticed,
--          _epoch.lua)
-- ARGV[2]  optional: ",id=ms,...", for each epoch that census heard, a time
--          on that node's clock; the node whose epoch it is drops the
--          notices written before then, as the new one refuses every view
--          they did, for longer (census_args in redlock_async/_engine/_notices.py)
--
-- Returns {epoch, now, age, view_1, left_1, view_2, left_2, ...}: this
-- node's epoch, its clock (ms), how long ago (ms) the epoch was made (-1:
-- not known, an epoch made by an earlier release), then each view whose
-- record is alive and for how many ms more, by this node's clock. Index
-- entries whose record has expired are dropped.
--
-- The epoch is made anew when missing (as any granting script would) and
-- when the server answering is not the one that made it: a node restarted
-- from its append-only file, a replica promoted by a failover, or a primary
-- failed over and back (the same run_id, a new replication id: epoch_run_id),
-- has the old epoch in its data but may lack the last writes before it took over.
-- The records made under the old epoch are deleted with it: a record alive
-- must mean a view checked in the current epoch (_epoch.lua). (When INFO is
-- refused, only a missing epoch is seen.)
local run_id, replid = epoch_run_id() -- _epoch.lua, prepended
local id = redis.call('HGET', KEYS[1], 'id')
local now = epoch_now()
if ARGV[1] and #ARGV[1] > 2 then
    local notices = KEYS[1] .. '~notices'
    local cutoff = id and ARGV[2] and string.match(ARGV[2], ',' .. id .. '=(%d+),')
    if cutoff then
        cutoff = tonumber(cutoff)
        local all = redis.call('HGETALL', notices)
        for i = 1, #all, 2 do
            if tonumber(all[i + 1]) < cutoff then
                redis.call('HDEL', notices, all[i])
            end
        end
    end
    redis.call('HSET', notices, ARGV[1], now)
end
local fresh = not id or (run_id ~= nil and epoch_foreign(KEYS[1], run_id, replid))
local reply = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
    local view = all[i]
    if view ~= 'id' and view ~= 'run' and view ~= 'repl' and view ~= 'born' then
        local record = KEYS[1] .. ':' .. view
        local left = redis.call('PTTL', record)
        if fresh or left <= 0 then
            redis.call('HDEL', KEYS[1], view)
            if fresh then
                redis.call('DEL', record)
            end
        else
            reply[#reply + 1] = view
            reply[#reply + 1] = left
        end
    end
end
local age = 0
if fresh then
    id = epoch_make(KEYS[1], run_id, replid)
else
    local born = tonumber(redis.call('HGET', KEYS[1], 'born'))
    age = born and math.max(now - born, 0) or -1
end
table.insert(reply, 1, age)
table.insert(reply, 1, now)
table.insert(reply, 1, id)
return reply
