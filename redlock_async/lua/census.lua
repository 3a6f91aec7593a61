-- census.lua: this node's epoch and restart record, read when a client must
-- judge nodes it has not seen since they lost their data
-- (redlock_async/_engine/_epochs.py).
--
-- KEYS[1]  the record, ``<prefix>~epoch`` (_epoch.lua); No ARGV
--
-- Returns {epoch, view_1, left_1, view_2, left_2, ...}: this node's epoch,
-- then each view whose grants may still live and for how many ms more, by
-- this node's clock.
--
-- The epoch is made anew when missing (as any granting script would) and
-- when the server answering is not the one that made it: a node restarted
-- from its append-only file, or a replica promoted by a failover, has the
-- old epoch in its data but may lack the last writes before it took over.
-- (When INFO is refused, only a missing epoch is seen.)
local info = redis.pcall('INFO', 'server')
local run_id = type(info) == 'string' and string.match(info, 'run_id:(%x+)') or nil
local id = redis.call('HGET', KEYS[1], 'id')
if not id or (run_id ~= nil and redis.call('HGET', KEYS[1], 'run') ~= run_id) then
    local t = redis.call('TIME')
    local seed = (run_id or '') .. ':' .. t[1] .. ':' .. t[2] .. ':' .. KEYS[1]
    id = string.sub(redis.sha1hex(seed), 1, 16)
    redis.call('HSET', KEYS[1], 'id', id, 'run', run_id or '')
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reply = {id}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
    local ends = tonumber(all[i + 1])
    if all[i] ~= 'id' and all[i] ~= 'run' and ends ~= nil and ends > now then
        reply[#reply + 1] = all[i]
        reply[#reply + 1] = ends - now
    end
end
return reply
