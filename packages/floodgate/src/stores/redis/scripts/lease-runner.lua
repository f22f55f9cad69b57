-- The lease runner: runs a batch of lease calls (one key each, see lease.lua) in one atomic call on
-- the server's clock. scripts.ts appends it after prelude.lua, the algorithm twins, record.lua and
-- lease.lua. Every key of one call is in one slot (lease-call.ts groups them so), all declared.
--
-- ARGV[1]: the call's deadline on the server clock (ms; '' = none): past it, nothing is read or
--   written and the reply is the clock and 'expired', as runner.lua does.
-- ARGV[2]: policy count, then per policy: algorithm, limit, periodMs, burst;
--   then the request count, and one binary string of the requests' numbers (little-endian doubles,
--   unpacked with one call each: tonumber of a text costs several times more), per request: now
--   (NaN = server clock), policy count, policy indexes (0-based), id, want, need, leaseMs, returnId,
--   returnUnused.
-- KEYS: per request, its policies' record keys, then their ledger keys (record key .. '#l').
-- Returns one binary string: the server's clock (ms) as a little-endian double; per request the now
--   it was decided at, granted and expiresAt (doubles), returned and allowed (bytes); per policy a byte allowed and remaining,
--   resetMs, retryAfterMs (doubles). lease-call.ts decodes it.

local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
if ARGV[1] ~= '' and serverNow > tonumber(ARGV[1]) then return struct.pack('<d', serverNow) .. 'expired' end

-- How many lease times a record's expiry may be padded by.
local LEASE_PAD = 4

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

local reply = { structPack('<d', serverNow) }
local keyAt = 0
local requestCount = tonumber(ARGV[arg])
local numbers = ARGV[arg + 1]
local at = 1
-- One request's inputs, refilled for every request (leaseKey only reads them): its policies, its
-- ask, its records and ledgers (nil when absent; else the position's record, whose state is the
-- position's buffer) and the expiries they carry.
local policies, records, ledgers, expiries = {}, {}, {}, {}
local ask = { id = 0, want = 0, need = 0, leaseMs = 0, returnId = 0, returnUnused = 0 }
local recordBuffers, stateBuffers = {}, {}
local lease = createLeaseEvaluation()
for _ = 1, requestCount do
  local now, count = structUnpack('<dd', numbers, at)
  at = at + 16
  -- NaN (the only number unequal to itself): the server's clock.
  if now ~= now then now = serverNow end
  for i = 1, count do
    policies[i] = leasePolicies[structUnpack('<d', numbers, at) + 1]
    at = at + 8
  end
  for i = count + 1, #policies do policies[i] = nil end
  ask.id, ask.want, ask.need, ask.leaseMs, ask.returnId, ask.returnUnused = structUnpack('<dddddd', numbers, at)
  at = at + 48
  -- A `now` ahead of the server's keeps records that much longer, as runner.lua does.
  local lead = max(0, now - serverNow)
  for i = 1, 2 * count do
    local text = texts[KEYS[keyAt + i]]
    local record = false
    expiries[i] = false
    if text then
      record = recordBuffers[i]
      if record == nil then
        record = { blockedUntil = 0, state = nil }
        recordBuffers[i] = record
        stateBuffers[i] = {}
      end
      expiries[i] = decodeRecordInto(text, record, stateBuffers[i])
    end
    if i <= count then
      records[i] = record or nil
    else
      ledgers[i - count] = record and record.state or nil
    end
  end
  leaseKey(records, ledgers, now, ask, policies, lease)
  -- A key's records must outlive its last lease by a settling time, so each renewal (one a lease
  -- time) would move their expiry on by a lease time and set it anew; padded by a few lease times,
  -- the expiry is set once in every few renewals (see writeRecord).
  -- A state record says whether its ledger holds leases ('L', see record.lua): exact's runner reads
  -- the ledger only then.
  local padMs = LEASE_PAD * ask.leaseMs
  for i = 1, 2 * count do
    local key = KEYS[keyAt + i]
    local record = lease.records[i]
    local leased = i <= count and lease.records[count + i].state ~= nil
    local ttl = lease.ttlMs[i] + lead
    texts[key] = writeRecord(key, texts[key], expiries[i], record.blockedUntil, record.state, ttl, serverNow, padMs, leased)
  end
  keyAt = keyAt + 2 * count
  reply[#reply + 1] = structPack('<dddBB', now, lease.granted, lease.expiresAt, lease.returned and 1 or 0, lease.allowed and 1 or 0)
  for i = 1, count do
    local result = lease.results[i]
    reply[#reply + 1] = structPack('<Bddd', result.allowed and 1 or 0, result.remaining, result.resetMs, result.retryAfterMs)
  end
end
return table.concat(reply)
