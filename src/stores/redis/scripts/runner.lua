-- The runner: decides a batch of requests, each one key's policies all-or-nothing, in one atomic
-- call. scripts.ts appends it after prelude.lua and every algorithm file. evaluateKeyInto below
-- mirrors src/core/evaluate.ts line by line (same names, same order); the rest reads, decodes and
-- writes.
--
-- Keys: KEYS, then ARGV[2 .. 1 + ARGV[1]]: every policy key, request after request. On a Cluster one
--   call serves every request of one node, but only keys of one slot may be declared in KEYS; the
--   others travel in ARGV, which the script's allow-cross-slot-keys flag permits. All keys are read
--   before anything is written, so a key the node does not own fails the call with no write done.
-- ARGV after those keys:
--   policy count, then per policy: algorithm, limit, periodMs, burst, shaping (1/0), blockMs;
--   read group count, then each group's key count (keys in order; a Cluster command may not read
--   keys of several slots, so each slot is one group there);
--   run count, then per run (consecutive requests alike but for their keys): now ('' = server
--   clock), cost, policy count, policy indexes, request count.
-- Record (one string per key): 'S', the key's expiry (server ms, see paddedExpiry) and the state's
--   numbers, or 'B', the expiry, blockedUntil and the state's numbers, or (a block without a state)
--   'N', the expiry and blockedUntil; numbers as little-endian doubles. Lower-case tags ('s', 'b',
--   'n': the same without the expiry, written by earlier builds) are still read.
-- Returns one binary string (cheaper for Redis to reply than many integers): the server's clock
--   (ms) as a little-endian double, then per request a byte allowed (1/0), then per policy a byte of
--   flags (REPLY_ALLOWED, REPLY_BLOCKED) and remaining, resetMs, retryAfterMs, delayMs as
--   little-endian doubles (whole numbers, so exact). batch-codec.ts decodes it.

-- The step's own table serves as the policy's result: steps are fresh tables nobody else holds.
local function toResult(step)
  step.blocked = false
  return step
end

-- The steps of the call in progress: evaluateKeyInto never re-enters itself, so one table serves.
local steps = {}

-- Sets `out` (allowed, results, records, ttlMs) for `policies`, reusing its tables: the caller reads
-- it before the next call. The records are new tables every time (the runner keeps them).
local function evaluateKeyInto(records, now, cost, policies, out)
  local results = out.results
  local nextRecords = out.records
  local ttlMs = out.ttlMs
  local allowed = true
  for i = 1, #policies do
    local policy = policies[i]
    local record = records[i]
    local blockedUntil = (record and record.blockedUntil > now) and record.blockedUntil or 0
    local step = ALGORITHMS[policy.algorithm].step(record and record.state, now, cost, policy)
    if cost >= 0 and blockedUntil > 0 then
      -- Blocked (a peek too): the wait covers the block and the algorithm's own wait after it.
      local wait = blockedUntil - now
      steps[i] = false
      results[i] = { allowed = false, remaining = 0, resetMs = max(wait, step.resetMs),
        retryAfterMs = max(wait, step.allowed and 0 or step.retryAfterMs), delayMs = 0, blocked = true }
      allowed = false
    else
      steps[i] = step
      if not step.allowed then allowed = false end
      results[i] = toResult(step)
    end
  end

  for i = 1, #policies do
    local policy = policies[i]
    local algorithm = ALGORITHMS[policy.algorithm]
    local record = records[i]
    local blockedUntil = (record and record.blockedUntil > now) and record.blockedUntil or 0
    local state = record and record.state
    local step = steps[i]
    steps[i] = false
    if allowed then
      state = step.state
    elseif step then
      if not step.allowed and cost > 0 and policy.blockMs > 0 then
        blockedUntil = now + policy.blockMs
        local result = results[i]
        result.retryAfterMs = max(result.retryAfterMs, policy.blockMs)
        result.resetMs = max(result.resetMs, policy.blockMs)
      elseif step.allowed and cost > 0 then
        results[i] = toResult(algorithm.step(state, now, 0, policy))
      end
    end
    nextRecords[i] = { blockedUntil = blockedUntil, state = state }
    local ttl = state == nil and 1 or algorithm.ttl(state, now, policy)
    if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
    ttlMs[i] = ttl
  end
  out.allowed = allowed
  return out
end

-- Records are read and written only here, as little-endian doubles: exact (like %.17g text) but
-- several times cheaper to encode and decode. A first byte says what follows (see the top of this
-- file), so the usual record (no block) holds just its state. Long states go in chunks of
-- RECORD_CHUNK numbers, which keeps every struct call far below Lua's limit on values per call.
local RECORD_CHUNK = 64
local recordFormats = {}

local function recordFormat(count)
  local format = recordFormats[count]
  if not format then
    format = '<' .. string.rep('d', count)
    recordFormats[count] = format
  end
  return format
end

-- The `count` numbers of a state that starts at byte `at` of `text`.
local function decodeState(text, at, count)
  if count <= RECORD_CHUNK then
    local state = { struct.unpack(recordFormat(count), text, at) }
    state[count + 1] = nil -- struct.unpack also returns the position after the last number
    return state
  end
  local state = {}
  for from = 1, count, RECORD_CHUNK do
    local chunk = { struct.unpack(recordFormat(min(RECORD_CHUNK, count - from + 1)), text, at + 8 * (from - 1)) }
    for i = 1, #chunk - 1 do state[from + i - 1] = chunk[i] end
  end
  return state
end

local function notARecord(key)
  error('Floodgate: ' .. key .. ' does not hold a Floodgate record (another program, or a Floodgate ' ..
    'build before binary records, wrote it); delete the key', 0)
end

-- The record in `text` and the expiry it carries (or false), see encodeRecord.
local function decodeRecord(text, key)
  if not text then return nil, false end
  local tag = string.sub(text, 1, 1)
  local at = 2
  local expiresAt = false
  if tag == 'S' or tag == 'B' or tag == 'N' then
    if #text < 9 then notARecord(key) end
    expiresAt = struct.unpack('<d', text, 2)
    tag = string.lower(tag)
    at = 10
  end
  local count = (#text - at + 1) / 8
  if count ~= floor(count) or count < 0 or (tag ~= 's' and (tag ~= 'b' and tag ~= 'n' or count < 1)) then
    notARecord(key)
  end
  if tag == 's' then return { blockedUntil = 0, state = decodeState(text, at, count) }, expiresAt end
  local blockedUntil = struct.unpack('<d', text, at)
  if tag == 'n' then return { blockedUntil = blockedUntil, state = nil }, expiresAt end
  return { blockedUntil = blockedUntil, state = decodeState(text, at + 8, count - 1) }, expiresAt
end

-- `state`'s numbers, packed.
local function encodeState(state)
  local count = #state
  if count <= RECORD_CHUNK then return struct.pack(recordFormat(count), unpack(state)) end
  local parts = {}
  for from = 1, count, RECORD_CHUNK do
    local to = min(count, from + RECORD_CHUNK - 1)
    parts[#parts + 1] = struct.pack(recordFormat(to - from + 1), unpack(state, from, to))
  end
  return table.concat(parts)
end

-- The record's text: an upper-case tag, the expiry the key was given, then the numbers.
local function encodeRecord(record, expiresAt)
  local blockedUntil, state = record.blockedUntil, record.state
  if blockedUntil == 0 then return 'S' .. struct.pack('<d', expiresAt) .. encodeState(state) end
  if state == nil then return 'N' .. struct.pack('<dd', expiresAt, blockedUntil) end
  return 'B' .. struct.pack('<dd', expiresAt, blockedUntil) .. encodeState(state)
end

-- Every key of the batch, declared ones first.
local keys = {}
for i = 1, #KEYS do keys[i] = KEYS[i] end
local extraKeys = tonumber(ARGV[1])
for i = 1, extraKeys do keys[#keys + 1] = ARGV[1 + i] end
local arg = 2 + extraKeys

local policies = {}
local policyCount = tonumber(ARGV[arg])
arg = arg + 1
for i = 1, policyCount do
  policies[i] = {
    algorithm = ARGV[arg],
    limit = tonumber(ARGV[arg + 1]),
    periodMs = tonumber(ARGV[arg + 2]),
    burst = tonumber(ARGV[arg + 3]),
    shaping = ARGV[arg + 4] == '1',
    blockMs = tonumber(ARGV[arg + 5]),
  }
  arg = arg + 6
end

-- Read phase: every key's record, one MGET per read group (keys of one slot; on a standalone
-- server all keys), in chunks so no call has too many arguments. Everything is read and decoded
-- before anything is written, so a failing read (a key the node does not own, a corrupt record)
-- fails the whole call with no write done. `texts` and `records` (false when absent) then follow
-- every write, so requests that share a key see each other's writes, as if each ran as its own call.
local MGET_CHUNK = 1000
local texts = {}
local records = {}
local expiries = {}
local groupCount = tonumber(ARGV[arg])
arg = arg + 1
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[arg + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do
    local to = min(groupEnd, from + MGET_CHUNK - 1)
    local values = redis.call('MGET', unpack(keys, from, to))
    for i = from, to do
      local key = keys[i]
      if texts[key] == nil then
        local text = values[i - from + 1]
        texts[key] = text
        local record, expiresAt = decodeRecord(text, key)
        records[key] = record or false
        expiries[key] = expiresAt
      end
    end
  end
  groupStart = groupEnd + 1
end
arg = arg + groupCount

local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)

-- One request's inputs and evaluation, refilled for every request (tables are the costly part).
local requestPolicies = {}
local requestKeys = {}
local requestRecords = {}
local evaluation = { allowed = true, results = {}, records = {}, ttlMs = {} }
local lastCount = 0

-- Drops entries past `count` that an earlier, longer request left, so `#` sees this request's length.
local function trim(count)
  for i = count + 1, lastCount do
    requestPolicies[i] = nil
    requestKeys[i] = nil
    requestRecords[i] = nil
    evaluation.results[i] = nil
    evaluation.records[i] = nil
    evaluation.ttlMs[i] = nil
  end
  lastCount = count
end

-- Every record carries the expiry its key was given (an absolute server time, see the tag above),
-- padded: the time the record must be kept until, rounded up to a grid of EXPIRY_GRID_MS doubled
-- while it stays within a sixteenth of the record's ttl (1 s for ttls under 32 s, 128 s for an hour).
-- Touching a key's expiry costs about as much as the rest of its SET, so a write whose record need
-- not be kept past that expiry keeps the key's (KEEPTTL): with the pad, most writes of a busy key
-- do, and a window's record needs one expiry all window long. Keeping a record longer is harmless:
-- stepping a state after its ttl is the same as stepping no state, and Redis still holds only keys
-- active within the pad. The expiry goes to Redis as PXAT and the text made of it once per call
-- (a number argument to redis.call is converted to text each time, which costs a third of a SET).
local EXPIRY_GRID_MS = 1000
local expiryTexts = {}

-- The expiry for a record kept until `at` (server ms), `ttl` ms from now.
local function paddedExpiry(at, ttl)
  local grid = EXPIRY_GRID_MS
  while grid * 32 <= ttl do grid = grid * 2 end
  return ceil(at / grid) * grid
end

local function expiryText(expiresAt)
  local text = expiryTexts[expiresAt]
  if not text then
    text = string.format('%.0f', expiresAt)
    expiryTexts[expiresAt] = text
  end
  return text
end

-- The reply's flag bits, and each request's allowed byte.
local REPLY_ALLOWED = 1
local REPLY_BLOCKED = 2
local REQUEST_BYTE = { [true] = '\1', [false] = '\0' }

-- Decides the next request (its keys come next in `keys`) and appends its reply to `out`.
local out = { struct.pack('<d', serverNow) }
local n = 1
local keyIndex = 0
local function decideNext(now, cost, count)
  for i = 1, count do
    keyIndex = keyIndex + 1
    local key = keys[keyIndex]
    requestKeys[i] = key
    requestRecords[i] = records[key] or nil
  end

  evaluateKeyInto(requestRecords, now, cost, requestPolicies, evaluation)

  -- A clock ahead of the server's (tests inject `now`) keeps records that much longer, so Redis
  -- never forgets a record before the request's own clock says it expired. Keeping one longer is
  -- harmless: stepping a state after its ttl is the same as stepping no state.
  local lead = max(0, now - serverNow)
  for i = 1, count do
    local key = requestKeys[i]
    local record = evaluation.records[i]
    if record.state == nil and record.blockedUntil == 0 then
      if texts[key] then
        redis.call('DEL', key)
        texts[key] = false
        records[key] = false
        expiries[key] = false
      end
    else
      local ttl = ceil(evaluation.ttlMs[i] + lead)
      local expiresAt = expiries[key]
      if expiresAt and expiresAt >= serverNow + ttl then
        local text = encodeRecord(record, expiresAt)
        -- An unchanged record is not written at all.
        if text ~= texts[key] then
          redis.call('SET', key, text, 'KEEPTTL')
          texts[key] = text
        end
      else
        expiresAt = paddedExpiry(serverNow + ttl, ttl)
        local text = encodeRecord(record, expiresAt)
        redis.call('SET', key, text, 'PXAT', expiryText(expiresAt))
        texts[key] = text
        expiries[key] = expiresAt
      end
      -- States are never changed in place, only replaced, so the record itself can be kept.
      records[key] = record
    end
  end

  n = n + 1
  out[n] = REQUEST_BYTE[evaluation.allowed]
  for i = 1, count do
    local result = evaluation.results[i]
    local flags = (result.allowed and REPLY_ALLOWED or 0) + (result.blocked and REPLY_BLOCKED or 0)
    n = n + 1
    out[n] = struct.pack('<Bdddd', flags, result.remaining, result.resetMs, result.retryAfterMs, result.delayMs)
  end
end

local runCount = tonumber(ARGV[arg])
arg = arg + 1
for run = 1, runCount do
  local now = ARGV[arg] == '' and serverNow or tonumber(ARGV[arg])
  local cost = tonumber(ARGV[arg + 1])
  local count = tonumber(ARGV[arg + 2])
  arg = arg + 3
  trim(count)
  for i = 1, count do requestPolicies[i] = policies[tonumber(ARGV[arg + i - 1])] end
  local requests = tonumber(ARGV[arg + count])
  arg = arg + count + 1
  for r = 1, requests do decideNext(now, cost, count) end
end
return table.concat(out)
