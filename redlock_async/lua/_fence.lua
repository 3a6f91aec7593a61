-- _fence.lua: the fencing counter step, prepended to every granting script
-- that can hand out a fencing token (acquire, rw_write_acquire, fair_acquire).
--
-- No KEYS, no ARGV: it defines one function for the scripts it is prepended to.
--
-- next_fence(key)
-- Returns the counter at ``key`` after the step: max(counter, floor) + 1,
--   where floor is the node's clock in whole seconds, written in
--   microseconds (unix seconds * 1000000). Errors when the key holds a
--   non-number (a failed vote).
--
-- Why the floor: a counter alone restarts from zero when its node loses its
-- data, and a token made with that node could then be lower than one handed
-- out before. With the floor, a node that lost its counter resumes at its
-- clock, above every earlier token, as long as node clocks agree within the
-- restart quarantine less one second (docs/fencing.md has the proof).
-- Whole seconds keep the nodes' answers equal in steady state (the client
-- then skips the write-back round trip); 10^6 grants a second on one name
-- would be needed for the counter to outrun the next second's floor.
-- Lua numbers are doubles: exact up to 2^53, i.e. until the year 2255.
local function next_fence(key)
    local floor = redis.call('TIME')[1] .. '000000'
    local counter = redis.call('GET', key)
    if not counter or tonumber(counter) < tonumber(floor) then
        redis.call('SET', key, floor)
    end
    return redis.call('INCR', key)
end
