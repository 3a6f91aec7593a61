-- census.lua: this node's epoch, live records and notices, for a client that
-- judges the nodes (redlock_async/_engine/_epochs.py; docs/guarantees.md).
--
-- KEYS[1]  <prefix>~epoch (_epoch.lua, prepended, says what it holds)
-- ARGV[1]  optional: the view the caller's previous census heard: each epoch
--          becomes this node's notice for its position unless one is newer
--
-- Returns {epoch, policy, k, <k items: notice field, epoch, ...>, view_1,
-- ms_left_1, ...}: policy is maxmemory-policy when the node may evict ('' if
-- not), then the notices, then each view whose record is alive (expired ones
-- leave the index). The epoch is made anew, and its records deleted, when
-- missing or made by another server (epoch_foreign).
local run_id, replid = epoch_run_id()
local id = redis.call('HGET', KEYS[1], 'id')
local notices = KEYS[1] .. '~newest'
if ARGV[1] then
    local mark, at = string.match(ARGV[1], '^[^,]*'), 0
    for epoch in string.gmatch(ARGV[1], ',([^,]+)') do
        at = at + 1
        local field = mark .. '.' .. at
        local known = epoch ~= '-' and redis.call('HGET', notices, field)
        if epoch ~= '-' and (not known or epoch_born(known) < epoch_born(epoch)) then
            redis.call('HSET', notices, field, epoch)
        end
    end
end
local fresh = not id or (run_id ~= nil and epoch_foreign(KEYS[1], run_id, replid))
if fresh then -- later than the one replaced, whose server's clock may have led
    id = epoch_make(KEYS[1], run_id, replid, id and epoch_born(id) + 1)
end
local memory = redis.pcall('INFO', 'memory')
local policy = type(memory) == 'string' and string.match(memory, 'maxmemory_policy:([%w-]+)')
local limit = type(memory) == 'string' and tonumber(string.match(memory, 'maxmemory:(%d+)'))
if policy == 'noeviction' or not limit or limit == 0 then
    policy = ''
end
local reply = redis.call('HGETALL', notices)
table.insert(reply, 1, #reply)
table.insert(reply, 1, policy)
table.insert(reply, 1, id)
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
    local view = all[i]
    if view ~= 'id' and view ~= 'run' and view ~= 'repl' and view ~= 'born' then
        local record = KEYS[1] .. ':' .. view
        local left = redis.call('PTTL', record)
        if fresh or left <= 0 then
            redis.call('HDEL', KEYS[1], view)
            redis.call('DEL', record)
        else
            reply[#reply + 1] = view
            reply[#reply + 1] = left
        end
    end
end
return reply
