-- Merges into one usage hash (one key, policy and window); the twin of src/regions/crdt.ts.
--
-- KEYS[1]  the hash
-- ARGV[1]  ttl in ms (the hash lives this long after its last write)
-- ARGV[2]  this region's name ('' when the caller is a peer: no process entries, no claims)
-- ARGV[3]  the calling process's origin id
-- ARGV[4]  n: process entries that follow, as n pairs (sub, cumulative): `u`, `d` or `g|<to>`
-- then     m pairs (field, value) of shared fields to merge by maximum, up to `claim`
-- last     claim: '1' to claim the others' `u|` growth not yet charged here (`a|` fields), else '0'
--
-- Returns { claimed, field1, value1, field2, value2, ... }: the units newly claimed, and every
-- shared field (u|, d|, g|) of the hash after the merge. Values are whole numbers.

local key = KEYS[1]
local ttl = tonumber(ARGV[1])
local region = ARGV[2]
local origin = ARGV[3]
local n = tonumber(ARGV[4])
local last = #ARGV
local wrote = false

local i = 5
for _ = 1, n do
  local sub = ARGV[i]
  local cumulative = tonumber(ARGV[i + 1])
  i = i + 2
  local originField = 'o|' .. origin .. '|' .. sub
  local old = tonumber(redis.call('HGET', key, originField) or '0')
  if cumulative > old then
    redis.call('HSET', key, originField, cumulative)
    redis.call('HINCRBY', key, string.sub(sub, 1, 1) .. '|' .. region .. string.sub(sub, 2), cumulative - old)
    wrote = true
  end
end

while i < last do
  local field = ARGV[i]
  local value = tonumber(ARGV[i + 1])
  i = i + 2
  local old = tonumber(redis.call('HGET', key, field) or '-1')
  if value > old then
    redis.call('HSET', key, field, value)
    wrote = true
  end
end

local all = redis.call('HGETALL', key)
local reply = { 0 }
local claimed = 0
for j = 1, #all, 2 do
  local field = all[j]
  local kind = string.sub(field, 1, 2)
  if kind == 'u|' or kind == 'd|' or kind == 'g|' then
    reply[#reply + 1] = field
    reply[#reply + 1] = all[j + 1]
    if ARGV[last] == '1' and kind == 'u|' and string.sub(field, 3) ~= region then
      local claimField = 'a|' .. string.sub(field, 3)
      local used = tonumber(all[j + 1])
      local done = tonumber(redis.call('HGET', key, claimField) or '0')
      if used > done then
        redis.call('HSET', key, claimField, used)
        claimed = claimed + used - done
        wrote = true
      end
    end
  end
end
reply[1] = claimed
if wrote then redis.call('PEXPIRE', key, ttl) end
return reply
