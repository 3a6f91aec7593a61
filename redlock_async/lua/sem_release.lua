-- sem_release.lua: give back the semaphore slots an attempt reserved on one node.
--
-- KEYS[1], KEYS[2] ... KEYS[n]
--          slot keys the attempt may have reserved (never the slot a grant
--          was made on, when one was: release.lua releases that one)
-- ARGV[1]  token of the attempt
--
-- Returns
--   k >= 0  how many of the keys held ARGV[1] and were deleted; keys absent
--           or holding another token (expired, someone else's grant now)
--           are not touched
--
-- Compare-and-delete, key by key, as release.lua does for one key. No wake-up
-- is announced: this undoes an attempt, and waking every waiter for it would
-- make them stampede.
local released = 0
for i = 1, #KEYS do
    if redis.call('GET', KEYS[i]) == ARGV[1] then
        redis.call('DEL', KEYS[i])
        released = released + 1
    end
end
return released
