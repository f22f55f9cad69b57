-- The merge runner: merges a batch of requests' units into their keys' records in one atomic call,
-- and answers every record after the merge; RedisStore.merge runs it (merge-codec.ts encodes the call
-- and decodes the reply). Appended after prelude.lua, the algorithm files, record.lua and merge.lua.
-- Each request is MemoryStore.mergeOne's twin: the same records, applied flags and ttls.
--
-- Keys: KEYS, then ARGV[2 .. 1 + ARGV[1]]: every policy key, request after request (on a Cluster only
--   the routing slot's keys are declared, as runner.lua does; the script's allow-cross-slot-keys flag
--   lets it touch the others, which the node serves). Beside each record, `<key>:wb` is a hash of the
--   last seq applied per origin (idempotency), with the record's expiry, at most MAX_ORIGINS fields.
-- ARGV after those keys:
--   policy count, then per policy: algorithm, limit, periodMs, burst, shaping (1/0), blockMs (read by
--   batch-args.lua, shared with runner.lua; a merge does not start blocks);
--   read group count, then each group's key count (one MGET per slot, as runner.lua);
--   request count, then per request: now ('' = server clock), units, origin ('' = none), seq,
--   policy count, policy indexes.
-- Returns one binary string: the server clock (ms) as a little-endian double, then per request a
--   byte applied (1/0), then per policy a byte with the state's length (255: no state), blockedUntil
--   and the state's numbers, as little-endian doubles.

local MAX_ORIGINS = 64
local NO_STATE = 255

local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)

local keys, arg = readBatchKeys(1)
local policies
policies, arg = readPolicies(arg)

-- Every record is read (and checked) before anything is written, as runner.lua does.
local MGET_CHUNK = 1000
local texts = {}
local groupCount = tonumber(ARGV[arg])
arg = arg + 1
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[arg + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do readRecords(keys, from, min(groupEnd, from + MGET_CHUNK - 1), texts) end
  groupStart = groupEnd + 1
end
arg = arg + groupCount

local out = { struct.pack('<d', serverNow) }
local keyIndex = 0
local record = { blockedUntil = 0, state = nil }
local requests = tonumber(ARGV[arg])
arg = arg + 1
for _ = 1, requests do
  local now = ARGV[arg] == '' and serverNow or tonumber(ARGV[arg])
  local units = tonumber(ARGV[arg + 1])
  local origin = ARGV[arg + 2]
  local seq = tonumber(ARGV[arg + 3])
  local count = tonumber(ARGV[arg + 4])
  -- A `now` ahead of the server's (tests) keeps the record that much longer, as runner.lua does.
  local lead = max(0, now - serverNow)
  local applied = true
  local parts = {}
  for i = 1, count do
    local p = policies[tonumber(ARGV[arg + 4 + i])]
    keyIndex = keyIndex + 1
    local key = keys[keyIndex]
    local text = texts[key]
    local state, blockedUntil, expiresAt = nil, 0, false
    if text then
      expiresAt = decodeRecordInto(text, record, {})
      state = record.state
      if record.blockedUntil > now then blockedUntil = record.blockedUntil end
    end
    local seenKey = key .. ':wb'
    local take = units
    local last = false
    if origin ~= '' then
      last = redis.call('HGET', seenKey, origin)
      if last and seq <= tonumber(last) then
        take = 0
        applied = false
      end
    end
    if take ~= 0 then
      state = MERGES[p.algorithm](state, now, take, p)
      local ttl = state == nil and 1 or ALGORITHMS[p.algorithm].ttl(state, now, p)
      if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
      local written = writeRecord(key, text, expiresAt, blockedUntil, state, ttl + lead, serverNow)
      texts[key] = written
      if origin ~= '' then
        redis.call('HSET', seenKey, origin, seq)
        -- A new origin: past MAX_ORIGINS the record forgets them all and starts again (key-entry.ts).
        if not last and redis.call('HLEN', seenKey) > MAX_ORIGINS then
          redis.call('DEL', seenKey)
          redis.call('HSET', seenKey, origin, seq)
        end
        -- The hash expires with its record; writeRecord mostly keeps the record's expiry, and then so does this.
        local keptUntil = written and struct.unpack('<d', written, 2)
        if keptUntil and (keptUntil ~= expiresAt or not last) then
          redis.call('PEXPIREAT', seenKey, string.format('%.0f', keptUntil))
        end
      end
    end
    if state == nil then
      parts[i] = struct.pack('<Bd', NO_STATE, blockedUntil)
    else
      parts[i] = struct.pack('<Bd', #state, blockedUntil) .. struct.pack('<' .. string.rep('d', #state), unpack(state))
    end
  end
  out[#out + 1] = applied and '\1' or '\0'
  for i = 1, count do out[#out + 1] = parts[i] end
  arg = arg + 5 + count
end
return table.concat(out)
