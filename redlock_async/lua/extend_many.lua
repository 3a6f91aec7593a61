-- extend_many.lua: renew many grants on one node, each only if it is still ours.
--
-- KEYS[1], KEYS[2] ... KEYS[n]
--          one key per grant: a lock or writer key (a string holding the
--          token), or a read-write lock's reader set
-- ARGV[1]  the first grant's kind: "x" for a string key (as extend.lua),
--          "r" for a reader set (as rw_read_extend.lua)
-- ARGV[2]  the first grant's token
-- ARGV[3]  the first grant's new ttl in milliseconds from now, an integer > 0
--          ... and so on: ARGV[3i-2], ARGV[3i-1], ARGV[3i] for KEYS[i]
--
-- Returns an array with one entry per key, in order:
--   1         the grant was still ours; it now expires no sooner than its
--             ttl from now (raised to that, or already later)
--   0         the key is absent, holds another token, or the reader expired:
--             nothing was touched (never re-created)
--   a string  the error the node raised for that key (e.g. WRONGTYPE): a
--             failed vote for that grant only
--
-- Each key is checked and renewed on its own, exactly as extend.lua or
-- rw_read_extend.lua would, and one key's error never fails the others
-- (redis.pcall). As there, an expiry is only ever raised, never lowered, a
-- reader's score included: another live copy of the grant may have asked
-- for a later one and report it held until then (extend.lua says why).
-- The client sends at most about a thousand keys per call, so that one
-- call keeps the node busy for a millisecond or two. Keys of any hash slot:
-- the client batches only on nodes that are not a Redis Cluster.
--
-- ARGV[#ARGV]  last of all: the key of the record of the caller's view of the
--   nodes' epochs (_epoch.lua, prepended). A node whose epoch is not in the
--   view answers -9 (STALE) and does nothing else; the record is raised.
local longest = 0 -- the record must outlive the longest of the renewals
for i = 1, #KEYS do
    longest = math.max(longest, tonumber(ARGV[3 * i]))
end
if not epoch_check(ARGV[#ARGV], longest) then
    return -9 -- STALE: this node lost its data since the caller's census
end
local function failed(reply)
    return type(reply) == 'table' and reply.err ~= nil
end

local function extend_string(key, token, ttl)
    local held = redis.pcall('GET', key)
    if failed(held) then
        return held.err
    end
    if held ~= token then
        return 0
    end
    if redis.call('PTTL', key) < tonumber(ttl) then
        redis.call('PEXPIRE', key, ttl)
    end
    return 1
end

local now = nil -- server time in ms, read once (only if a reader is renewed)

local function extend_reader(key, token, ttl)
    if now == nil then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    end
    local pruned = redis.pcall('ZREMRANGEBYSCORE', key, '-inf', now)
    if failed(pruned) then
        return pruned.err
    end
    local score = redis.call('ZSCORE', key, token)
    if score == false then
        return 0
    end
    local ms = tonumber(ttl)
    if tonumber(score) < now + ms then
        redis.call('ZADD', key, 'XX', now + ms, token)
    end
    if redis.call('PTTL', key) < ms then
        redis.call('PEXPIRE', key, ms)
    end
    return 1
end

local result = {}
for i = 1, #KEYS do
    local kind, token, ttl = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
    if kind == 'r' then
        result[i] = extend_reader(KEYS[i], token, ttl)
    else
        result[i] = extend_string(KEYS[i], token, ttl)
    end
end
return result
