-- The runner: decides a batch of requests, each one key's policies all-or-nothing, in one atomic
-- call. scripts.ts appends it after prelude.lua and every algorithm file. evaluateKeyInto below
-- mirrors src/core/evaluate.ts line by line (same names, same order); a request of one policy (the
-- usual one) is decided by the main loop itself, evaluateKeyInto unrolled for one policy; the rest
-- reads, decodes and writes.
--
-- ARGV[1]: the call's deadline on the server clock (ms; '' = none). A call that runs after it (it
--   waited out a paused, stopped or overloaded server) charges nothing and answers the clock and
--   'expired': its callers were answered by their fallback already (see redis-store.ts).
-- Keys: KEYS, then ARGV[3 .. 2 + ARGV[2]]: every policy key, request after request. On a Cluster one
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

-- Where evaluateKeyInto's steps write, one per policy position. It runs to the end without calling
-- anything that could re-enter it (steps are pure), so one set serves every call.
local stepBuffers = {}
-- Which policies were stepped (false: blocked) in the call in progress, for the same reason.
local steps = {}

local function setResult(result, allowed, remaining, resetMs, retryAfterMs, delayMs, blocked)
  result.allowed = allowed
  result.remaining = remaining
  result.resetMs = resetMs
  result.retryAfterMs = retryAfterMs
  result.delayMs = delayMs
  result.blocked = blocked
end

local function toResult(step, result)
  setResult(result, step.allowed, step.remaining, step.resetMs, step.retryAfterMs, step.delayMs, false)
end

-- One result and one record table per policy, created the first time an evaluation needs them.
local function sizeEvaluation(out, count)
  local results, records, ttlMs = out.results, out.records, out.ttlMs
  if #results == count then return end
  for i = #results, count + 1, -1 do
    results[i] = nil
    records[i] = nil
    ttlMs[i] = nil
  end
  for i = #results + 1, count do
    results[i] = { allowed = true, remaining = 0, resetMs = 0, retryAfterMs = 0, delayMs = 0, blocked = false }
    records[i] = { blockedUntil = 0, state = nil }
    ttlMs[i] = 1
  end
end

-- Sets `out` (allowed, results, records, ttlMs) for `policies` in place, the algorithms writing into
-- reused step buffers: results are valid until the next call with the same `out`, a new record
-- state (a step buffer's array) only until the next call at all. Input states are only read.
local function evaluateKeyInto(records, now, cost, policies, out)
  local results = out.results
  local nextRecords = out.records
  local ttlMs = out.ttlMs
  sizeEvaluation(out, #policies)
  for i = #stepBuffers + 1, #policies do stepBuffers[i] = createStepResult() end
  local allowed = true
  for i = 1, #policies do
    local policy = policies[i]
    local record = records[i]
    local blockedUntil = (record and record.blockedUntil > now) and record.blockedUntil or 0
    local state = record and record.state
    -- A caller feeding a previous answer's records back in: the step must not write what it reads.
    if state == stepBuffers[i].state then stepBuffers[i].state = {} end
    local step = ALGORITHMS[policy.algorithm].step(state, now, cost, policy, stepBuffers[i])
    if cost >= 0 and blockedUntil > 0 then
      -- Blocked (a peek too): the wait covers the block and the algorithm's own wait after it.
      local wait = blockedUntil - now
      steps[i] = false
      setResult(results[i], false, 0, max(wait, step.resetMs), max(wait, step.allowed and 0 or step.retryAfterMs), 0, true)
      allowed = false
    else
      steps[i] = step
      toResult(step, results[i])
      if not step.allowed then allowed = false end
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
        -- The step's own state is not kept when denied, so its buffer takes the peek.
        toResult(algorithm.step(state, now, 0, policy, step), results[i])
      end
    end
    local nextRecord = nextRecords[i]
    nextRecord.blockedUntil = blockedUntil
    nextRecord.state = state
    local ttl = state == nil and 1 or algorithm.ttl(state, now, policy)
    if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
    ttlMs[i] = ttl
  end
  out.allowed = allowed
  return out
end

-- Records are read and written only here, as little-endian doubles: exact (like %.17g text) but
-- several times cheaper to encode and decode. A first byte says what follows (see the top of this
-- file), so the usual record (no block) holds its expiry and state. A record is packed with one
-- struct call and decoded into reused tables (a table costs more than a struct call). Long states
-- go in chunks of RECORD_CHUNK numbers, which keeps every struct call far below Lua's limit on
-- values per call.
local RECORD_CHUNK = 64
local TAG_S, TAG_B, TAG_N = string.byte('SBN', 1, 3)
local TAG_s, TAG_b, TAG_n = string.byte('sbn', 1, 3)
local TAG_LOWER = TAG_s - TAG_S
local byte, structPack, structUnpack = string.byte, struct.pack, struct.unpack
local recordFormats = {}
-- The formats of the usual records' numbers, made without a call: an 'S' record of 1 to 4 numbers
-- (SHORT_RECORDS[count]), and its expiry and numbers (DOUBLES[count + 1]).
local SHORT_RECORDS = { '<Bdd', '<Bddd', '<Bdddd', '<Bddddd' }
local DOUBLES = { '<d', '<dd', '<ddd', '<dddd', '<ddddd' }
-- By length, the format of an 'S' record of 0 to 4 numbers whole (tag, expiry, numbers): the read
-- phase passes those without calling checkRecord (a call per key), and the one-policy loop decodes
-- one with a single struct call, its tag included (string.byte would cost ~2% of a decision).
local SHORT_LAYOUTS = { [9] = '<Bd', [17] = '<Bdd', [25] = '<Bddd', [33] = '<Bdddd', [41] = '<Bddddd' }

-- The struct format of `count` doubles after `head` (a format prefix such as 'Bd': tag, expiry).
local function recordFormat(count, head)
  local formats = recordFormats[head]
  if not formats then
    formats = {}
    recordFormats[head] = formats
  end
  local format = formats[count]
  if not format then
    format = '<' .. head .. string.rep('d', count)
    formats[count] = format
  end
  return format
end

-- Fills `state` with the `count` numbers that start at byte `at` of `text`, and returns it.
local function decodeStateInto(state, text, at, count)
  local length = #state
  if count <= 4 then
    -- struct.unpack also returns the position after the last number: cleared with the rest below.
    state[1], state[2], state[3], state[4], state[5] = struct.unpack(recordFormat(count, ''), text, at)
    length = max(length, count + 1)
  else
    for i = 1, count do state[i] = struct.unpack('<d', text, at + 8 * (i - 1)) end
  end
  for i = count + 1, length do state[i] = nil end
  return state
end

local function notARecord(key)
  error('Floodgate: ' .. key .. ' does not hold a Floodgate record (another program, or a Floodgate ' ..
    'build before binary records, wrote it); delete the key', 0)
end

-- A record's tag in lower case, where its numbers start, how many there are, and whether its tag
-- is upper-case (the expiry comes first).
local function recordHeader(text)
  local tag = string.byte(text, 1)
  if tag == TAG_S or tag == TAG_B or tag == TAG_N then return tag + TAG_LOWER, 10, (#text - 9) / 8, true end
  return tag, 2, (#text - 1) / 8, false
end

-- Fails the call unless `text` is a record (see the top of this file).
local function checkRecord(text, key)
  local tag, _, count = recordHeader(text)
  if count ~= floor(count) or count < 0 or (tag ~= TAG_s and (tag ~= TAG_b and tag ~= TAG_n or count < 1)) then
    notARecord(key)
  end
end

-- Decodes the record in `text` (checked) into `record`, its state into `state`, and returns the
-- expiry the record carries (or false), see encodeRecord.
local function decodeRecordInto(text, record, state)
  local count = (#text - 9) / 8
  if count <= 4 and byte(text, 1) == TAG_S then
    -- The usual record: expiry and state in one struct call, which also returns the position after
    -- the last number (state[count + 1], cleared with what an earlier, longer state left).
    local length = #state
    local expiresAt
    expiresAt, state[1], state[2], state[3], state[4], state[5] = structUnpack(DOUBLES[count + 1], text, 2)
    state[count + 1] = nil
    for i = 6, length do state[i] = nil end
    record.blockedUntil = 0
    record.state = state
    return expiresAt
  end
  local tag, at, hasExpiry
  tag, at, count, hasExpiry = recordHeader(text)
  local expiresAt = hasExpiry and struct.unpack('<d', text, 2)
  if tag == TAG_s then
    record.blockedUntil = 0
    record.state = decodeStateInto(state, text, at, count)
  else
    record.blockedUntil = struct.unpack('<d', text, at)
    record.state = tag ~= TAG_n and decodeStateInto(state, text, at + 8, count - 1) or nil
  end
  return expiresAt
end

-- The record's text: an upper-case tag, the expiry the key was given, then the numbers.
local function encodeRecord(blockedUntil, state, expiresAt)
  if state == nil then return struct.pack('<Bdd', TAG_N, expiresAt, blockedUntil) end
  local count = #state
  if blockedUntil == 0 and SHORT_RECORDS[count] then
    -- struct.pack reads as many numbers as its format names: the nils after a short state are ignored.
    return structPack(SHORT_RECORDS[count], TAG_S, expiresAt, state[1], state[2], state[3], state[4])
  end
  if count <= RECORD_CHUNK then
    if blockedUntil == 0 then return struct.pack(recordFormat(count, 'Bd'), TAG_S, expiresAt, unpack(state)) end
    return struct.pack(recordFormat(count, 'Bdd'), TAG_B, expiresAt, blockedUntil, unpack(state))
  end
  local parts = {}
  if blockedUntil == 0 then parts[1] = struct.pack('<Bd', TAG_S, expiresAt)
  else parts[1] = struct.pack('<Bdd', TAG_B, expiresAt, blockedUntil) end
  for from = 1, count, RECORD_CHUNK do
    local to = min(count, from + RECORD_CHUNK - 1)
    parts[#parts + 1] = struct.pack(recordFormat(to - from + 1, ''), unpack(state, from, to))
  end
  return table.concat(parts)
end

-- The server clock first, so that a call past its deadline reads and writes nothing.
local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
if ARGV[1] ~= '' and serverNow > tonumber(ARGV[1]) then return struct.pack('<d', serverNow) .. 'expired' end

-- Every key of the batch, declared ones first: KEYS itself when every key is declared (a standalone
-- server's calls), else a copy with the others appended (KEYS is left as Redis made it).
local extraKeys = tonumber(ARGV[2])
local keys = KEYS
if extraKeys > 0 then
  keys = {}
  for i = 1, #KEYS do keys[i] = KEYS[i] end
  for i = 1, extraKeys do keys[#keys + 1] = ARGV[2 + i] end
end
local arg = 3 + extraKeys

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
-- server all keys), in chunks so no call has too many arguments. Everything is read and checked
-- before anything is written, so a failing read (a key the node does not own, a corrupt record)
-- fails the whole call with no write done. `texts` (false when absent) then follows every write, so
-- requests that share a key see each other's writes, as if each ran as its own call; a record is
-- decoded when its request is decided.
local MGET_CHUNK = 1000
local texts = {}
local groupCount = tonumber(ARGV[arg])
arg = arg + 1
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[arg + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do
    local to = min(groupEnd, from + MGET_CHUNK - 1)
    local values = redis.call('MGET', unpack(keys, from, to))
    -- A key twice in the batch reads the same text twice: nothing is written before all are read.
    for i = from, to do
      local key = keys[i]
      local text = values[i - from + 1]
      if text and not (SHORT_LAYOUTS[#text] and byte(text, 1) == TAG_S) then checkRecord(text, key) end
      texts[key] = text
    end
  end
  groupStart = groupEnd + 1
end
arg = arg + groupCount

-- One request's inputs and evaluation, refilled for every request (tables are the costly part):
-- its policies, keys, records (nil when absent; else the position's record buffer, its state in the
-- position's state buffer) and the expiries they carry.
local requestPolicies = {}
local requestKeys = {}
local requestRecords = {}
local requestExpiries = {}
local recordBuffers = {}
local stateBuffers = {}
local evaluation = { allowed = true, results = {}, records = {}, ttlMs = {} }
-- evaluateKeyInto refills these tables in place, so they are looked up once.
local evaluationResults, evaluationRecords, evaluationTtlMs = evaluation.results, evaluation.records, evaluation.ttlMs
local lastCount = 0

-- Sizes the request's tables to `count` policies: entries an earlier, longer request left are
-- dropped, so `#` sees this request's length.
local function sizeRequest(count)
  for i = count + 1, lastCount do
    requestPolicies[i] = nil
    requestKeys[i] = nil
    requestRecords[i] = nil
    requestExpiries[i] = nil
  end
  for i = #recordBuffers + 1, count do
    recordBuffers[i] = { blockedUntil = 0, state = nil }
    stateBuffers[i] = {}
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

-- The reply so far (see the top of this file), and the index in `keys` of the last key decided.
local out = { struct.pack('<d', serverNow) }
local n = 1
local keyIndex = 0

-- The one-policy request's buffers: the usual record's state (never more than 5 numbers, so the
-- struct call below leaves nothing behind), any other record and its state, and where the step
-- writes.
local singleState = {}
local singleRecord = { blockedUntil = 0, state = nil }
local singleRecordState = {}
local singleStep = createStepResult()
-- redis.call, looked up once: the global's lookup costs ~1% of a decision.
local call = redis.call

local runCount = tonumber(ARGV[arg])
arg = arg + 1
for run = 1, runCount do
  local now = ARGV[arg] == '' and serverNow or tonumber(ARGV[arg])
  local cost = tonumber(ARGV[arg + 1])
  local count = tonumber(ARGV[arg + 2])
  arg = arg + 3
  local requests = tonumber(ARGV[arg + count])
  -- A clock ahead of the server's (tests inject `now`) keeps records that much longer, so Redis
  -- never forgets a record before the request's own clock says it expired. Keeping one longer is
  -- harmless: stepping a state after its ttl is the same as stepping no state.
  local lead = max(0, now - serverNow)
  if count == 1 then
    -- One policy (the usual request): evaluateKeyInto for one policy, unrolled into this loop, which
    -- saves its tables and calls (~0.4 µs a decision). The request is allowed exactly when its step
    -- is (and no block holds), a denied request keeps its record's state, and no step is re-read as
    -- a peek (that is for a policy that allowed while another denied). This loop is the script's
    -- hot path: it runs in the main chunk, where its variables are registers rather than a
    -- function's upvalues.
    local policy = policies[tonumber(ARGV[arg])]
    local algorithm = ALGORITHMS[policy.algorithm]
    local step, ttlOf, blockMs = algorithm.step, algorithm.ttl, policy.blockMs
    for r = 1, requests do
      keyIndex = keyIndex + 1
      local key = keys[keyIndex]
      local stored = texts[key]
      local state, blockedUntil, expiresAt = nil, 0, false
      if stored then
        -- decodeRecordInto's usual record, inline: a call costs ~3% of a decision. struct.unpack
        -- also returns the position after the last number, which lands at index count + 1
        -- ((length - 1) / 8) and is cleared. A record of another tag is decoded again below.
        local length = #stored
        local layout = SHORT_LAYOUTS[length]
        local tag
        if layout then
          tag, expiresAt, singleState[1], singleState[2], singleState[3], singleState[4], singleState[5] =
            structUnpack(layout, stored)
          singleState[(length - 1) / 8] = nil
        end
        if tag == TAG_S then
          state = singleState
        else
          expiresAt = decodeRecordInto(stored, singleRecord, singleRecordState)
          state = singleRecord.state
          if singleRecord.blockedUntil > now then blockedUntil = singleRecord.blockedUntil end
        end
      end
      local result = step(state, now, cost, policy, singleStep)
      local allowed = result.allowed
      local flags, remaining, resetMs, retryAfterMs, delayMs
      if cost >= 0 and blockedUntil > 0 then
        local wait = blockedUntil - now
        flags, remaining, delayMs = REPLY_BLOCKED, 0, 0
        resetMs = max(wait, result.resetMs)
        retryAfterMs = max(wait, allowed and 0 or result.retryAfterMs)
        allowed = false
      else
        remaining, resetMs, retryAfterMs, delayMs = result.remaining, result.resetMs, result.retryAfterMs, result.delayMs
        if allowed then
          flags = REPLY_ALLOWED
          state = result.state
        else
          flags = 0
          if cost > 0 and blockMs > 0 then
            blockedUntil = now + blockMs
            retryAfterMs = max(retryAfterMs, blockMs)
            resetMs = max(resetMs, blockMs)
          end
        end
      end

      if state == nil and blockedUntil == 0 then
        if stored then
          call('DEL', key)
          texts[key] = false
        end
      else
        -- An allowed step's state is as good as none after max(1, resetMs), so its ttl is at most
        -- that: an expiry that far away is kept without calling ttl (~5% of a decision).
        local keepsExpiry = expiresAt and allowed and blockedUntil == 0
          and expiresAt >= serverNow + (resetMs > 1 and resetMs or 1) + lead
        if not keepsExpiry then
          local ttl = state == nil and 1 or ttlOf(state, now, policy)
          if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
          ttl = ttl + lead
          -- Expiries and the server clock are whole ms, so comparing with ttl is comparing with
          -- ceil(ttl): the call is left to the rarer new expiry.
          keepsExpiry = expiresAt and expiresAt >= serverNow + ttl
          if not keepsExpiry then
            -- paddedExpiry, inline: a call costs ~1% of a decision on a new key.
            ttl = ceil(ttl)
            local grid = EXPIRY_GRID_MS
            while grid * 32 <= ttl do grid = grid * 2 end
            expiresAt = ceil((serverNow + ttl) / grid) * grid
          end
        end
        -- encodeRecord's usual record, inline for the same reason.
        local format = blockedUntil == 0 and state and SHORT_RECORDS[#state]
        local text
        if format then
          text = structPack(format, TAG_S, expiresAt, state[1], state[2], state[3], state[4])
        else
          text = encodeRecord(blockedUntil, state, expiresAt)
        end
        if keepsExpiry then
          -- An unchanged record is not written at all. One of the same length (the usual case:
          -- same algorithm, same block) is overwritten in place by SETRANGE, which keeps the expiry
          -- as KEEPTTL does but answers an integer (SET's status reply costs Lua a table) and
          -- reuses the stored string: ~0.1 µs cheaper than SET ... KEEPTTL. The offset is text, as
          -- every number argument to redis.call costs a conversion.
          if text ~= stored then
            if stored and #text == #stored then
              call('SETRANGE', key, '0', text)
            else
              call('SET', key, text, 'KEEPTTL')
            end
            texts[key] = text
          end
        else
          -- expiryText's cache, looked up here first for the same reason.
          local pxat = expiryTexts[expiresAt] or expiryText(expiresAt)
          call('SET', key, text, 'PXAT', pxat)
          texts[key] = text
        end
      end

      n = n + 1
      out[n] = structPack('<BBdddd', allowed and 1 or 0, flags, remaining, resetMs, retryAfterMs, delayMs)
    end
  else
    sizeRequest(count)
    for i = 1, count do requestPolicies[i] = policies[tonumber(ARGV[arg + i - 1])] end
    for r = 1, requests do
      -- The request's records (its keys come next in `keys`), decided, written and replied to.
      for i = 1, count do
        keyIndex = keyIndex + 1
        local key = keys[keyIndex]
        local text = texts[key]
        requestKeys[i] = key
        if text then
          requestRecords[i] = recordBuffers[i]
          requestExpiries[i] = decodeRecordInto(text, recordBuffers[i], stateBuffers[i])
        else
          requestRecords[i] = nil
          requestExpiries[i] = false
        end
      end

      evaluateKeyInto(requestRecords, now, cost, requestPolicies, evaluation)

      for i = 1, count do
        local key = requestKeys[i]
        local record = evaluationRecords[i]
        if record.state == nil and record.blockedUntil == 0 then
          if texts[key] then
            call('DEL', key)
            texts[key] = false
          end
        else
          local ttl = ceil(evaluationTtlMs[i] + lead)
          local expiresAt = requestExpiries[i]
          local keepsExpiry = expiresAt and expiresAt >= serverNow + ttl
          if not keepsExpiry then expiresAt = paddedExpiry(serverNow + ttl, ttl) end
          local text = encodeRecord(record.blockedUntil, record.state, expiresAt)
          if keepsExpiry then
            -- Written as in the one-policy loop above.
            local stored = texts[key]
            if text ~= stored then
              if stored and #text == #stored then
                call('SETRANGE', key, '0', text)
              else
                call('SET', key, text, 'KEEPTTL')
              end
              texts[key] = text
            end
          else
            call('SET', key, text, 'PXAT', expiryText(expiresAt))
            texts[key] = text
          end
        end
      end

      n = n + 1
      out[n] = REQUEST_BYTE[evaluation.allowed]
      for i = 1, count do
        local result = evaluationResults[i]
        local flags = (result.allowed and REPLY_ALLOWED or 0) + (result.blocked and REPLY_BLOCKED or 0)
        n = n + 1
        out[n] = structPack('<Bdddd', flags, result.remaining, result.resetMs, result.retryAfterMs, result.delayMs)
      end
    end
  end
  arg = arg + count + 1
end
return table.concat(out)
