-- Merges into usage hashes (one per key, policy and window); the twin of src/regions/crdt.ts.
--
-- ARGV[1]  this region's name ('' when the caller is a peer: no process entries, no claims)
-- then, for each hash KEYS[h] in order:
--   ttl in ms (the hash lives this long after its last write), the calling process's origin id,
--   n and n pairs (sub, cumulative) of process entries (`u`, `d` or `g|<to>`),
--   m and m pairs (field, value) of shared fields to merge by maximum,
--   claim: '1' to claim the others' `u|` growth not yet charged here (`a|` fields), else '0'.
--
-- Returns one reply per hash: { claimed, field1, value1, ... }, the units newly claimed and every
-- shared field (u|, d|, g|) of the hash after the merge. Values are whole numbers.

local region = ARGV[1]
local i = 2
local replies = {}

for h = 1, #KEYS do
  local key = KEYS[h]
  local ttl = tonumber(ARGV[i])
  local origin = ARGV[i + 1]
  local n = tonumber(ARGV[i + 2])
  i = i + 3
  local wrote = false
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

  local m = tonumber(ARGV[i])
  i = i + 1
  for _ = 1, m do
    local field = ARGV[i]
    local value = tonumber(ARGV[i + 1])
    i = i + 2
    local old = tonumber(redis.call('HGET', key, field) or '-1')
    if value > old then
      redis.call('HSET', key, field, value)
      wrote = true
    end
  end

  local claim = ARGV[i] == '1'
  i = i + 1
  local all = redis.call('HGETALL', key)
  local reply = { 0 }
  local claimed = 0
  for j = 1, #all, 2 do
    local field = all[j]
    local kind = string.sub(field, 1, 2)
    if kind == 'u|' or kind == 'd|' or kind == 'g|' then
      reply[#reply + 1] = field
      reply[#reply + 1] = all[j + 1]
      if claim and kind == 'u|' and string.sub(field, 3) ~= region then
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
  replies[h] = reply
end
return replies
