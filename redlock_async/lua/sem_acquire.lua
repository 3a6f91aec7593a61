-- sem_acquire.lua: one semaphore attempt on one node - reserve free slots.
--
-- A semaphore of limit L is L slots, each an exclusive lock key. The client
-- picks a random offset and sends a window of the slot keys starting there
-- (wrapping around), so that concurrent attempts start at different slots.
--
-- KEYS[1], KEYS[2] ... KEYS[n]
--          slot keys (strings holding a grant's token), in the order to try
--          them; 1 <= n <= 30, so that the reply fits a positive 32-bit
--          integer (bit i-1 stands for KEYS[i])
-- ARGV[1]  token: 40 hex characters, unique to this attempt
-- ARGV[2]  ttl in milliseconds, an integer > 0
-- ARGV[3]  the most slots to reserve, an integer in [1, n]
--
-- Returns
--   m > 0  a bitmask: bit i-1 is set when KEYS[i] was absent and now holds
--          ARGV[1], expiring in ARGV[2] ms (at most ARGV[3] bits are set, the
--          first free slots in KEYS order)
--   0      every slot of the window exists (held by other grants, or foreign
--          keys of any type): nothing was written
--
-- Each slot is taken with SET NX exactly like acquire.lua takes a lock: the
-- client grants itself one slot only when a quorum of nodes set that same
-- slot's bit, and releases the others (sem_release.lua).
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
if not epoch_check(ARGV[#ARGV], ARGV[2]) then
    return -9 -- STALE: this node lost its data since the caller's census
end
local mask, bit, left = 0, 1, tonumber(ARGV[3])
for i = 1, #KEYS do
    if redis.call('SET', KEYS[i], ARGV[1], 'NX', 'PX', ARGV[2]) then
        mask = mask + bit
        left = left - 1
        if left == 0 then
            return mask
        end
    end
    bit = bit * 2
end
return mask
