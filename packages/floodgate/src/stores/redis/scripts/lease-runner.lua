-- The lease runner: runs a batch of lease calls (one key each, see lease.lua) in one atomic call on
-- the server's clock. scripts.ts appends it after prelude.lua, the algorithm twins, record.lua and
-- lease.lua. Every key of one call is in one slot (lease-call.ts groups them so), all declared.
--
-- ARGV[1]: the call's deadline on the server clock (ms; '' = none): past it, nothing is read or
--   written and the reply is the clock and 'expired', as runner.lua does.
-- ARGV[2]: policy count, then per policy: algorithm, limit, periodMs, burst;
--   then the request count, and per request: now ('' = server clock), policy count, policy indexes
--   (0-based), id, want, need, leaseMs, returnId, returnUnused.
-- KEYS: per request, its policies' record keys, then their ledger keys (record key .. '#l').
-- Returns one binary string: the server's clock (ms) as a little-endian double; per request the now
--   it was decided at, granted and expiresAt (doubles), returned and allowed (bytes); per policy a byte allowed and remaining,
--   resetMs, retryAfterMs (doubles). lease-call.ts decodes it.

local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
if ARGV[1] ~= '' and serverNow > tonumber(ARGV[1]) then return struct.pack('<d', serverNow) .. 'expired' end

local leasePolicies = {}
local arg = 2
local policyCount = tonumber(ARGV[arg])
arg = arg + 1
for i = 1, policyCount do
  leasePolicies[i] = {
    algorithm = ARGV[arg],
    limit = tonumber(ARGV[arg + 1]),
    periodMs = tonumber(ARGV[arg + 2]),
    burst = tonumber(ARGV[arg + 3]),
    shaping = false,
  }
  arg = arg + 4
end

-- Every record is read (and checked) before anything is written.
local texts = {}
for from = 1, #KEYS, 1000 do readRecords(KEYS, from, min(#KEYS, from + 999), texts) end

local reply = { struct.pack('<d', serverNow) }
local keyAt = 0
local requestCount = tonumber(ARGV[arg])
arg = arg + 1
for _ = 1, requestCount do
  local now = ARGV[arg] == '' and serverNow or tonumber(ARGV[arg])
  local count = tonumber(ARGV[arg + 1])
  arg = arg + 2
  local policies = {}
  for i = 1, count do policies[i] = leasePolicies[tonumber(ARGV[arg + i - 1]) + 1] end
  arg = arg + count
  local ask = {
    id = tonumber(ARGV[arg]),
    want = tonumber(ARGV[arg + 1]),
    need = tonumber(ARGV[arg + 2]),
    leaseMs = tonumber(ARGV[arg + 3]),
    returnId = tonumber(ARGV[arg + 4]),
    returnUnused = tonumber(ARGV[arg + 5]),
  }
  arg = arg + 6
  -- A `now` ahead of the server's keeps records that much longer, as runner.lua does.
  local lead = max(0, now - serverNow)
  local records, ledgers, expiries = {}, {}, {}
  for i = 1, 2 * count do
    local text = texts[KEYS[keyAt + i]]
    expiries[i] = false
    if text then
      local record = { blockedUntil = 0, state = nil }
      expiries[i] = decodeRecordInto(text, record, {})
      if i <= count then records[i] = record else ledgers[i - count] = record.state end
    end
  end
  local lease = leaseKey(records, ledgers, now, ask, policies)
  for i = 1, 2 * count do
    local key = KEYS[keyAt + i]
    local record = lease.records[i]
    texts[key] = writeRecord(key, texts[key], expiries[i], record.blockedUntil, record.state, lease.ttlMs[i] + lead, serverNow)
  end
  keyAt = keyAt + 2 * count
  reply[#reply + 1] = struct.pack('<dddBB', now, lease.granted, lease.expiresAt, lease.returned and 1 or 0, lease.allowed and 1 or 0)
  for i = 1, count do
    local result = lease.results[i]
    reply[#reply + 1] = struct.pack('<Bddd', result.allowed and 1 or 0, result.remaining, result.resetMs, result.retryAfterMs)
  end
end
return table.concat(reply)
