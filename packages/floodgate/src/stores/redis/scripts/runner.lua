-- The runner: decides a batch of requests in one atomic call. scripts.ts appends it after
-- prelude.lua, every algorithm file, record.lua, evaluate.lua (generated from core/evaluate.ts), and
-- lease.lua with leased-exact.lua inside the function leasedExact (it returns readLedgers and
-- decideLeased); this file only decodes the arguments, reads the records, runs evaluate_key_into
-- (evaluateKeyInto's twin) per request (decideLeased for a request with live leases on its key),
-- writes and replies.
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
-- Returns one binary string (cheaper for Redis to reply than many integers): the server's clock
--   (ms) as a little-endian double, then per request a byte allowed (1/0), then per policy a byte of
--   flags (REPLY_ALLOWED, REPLY_BLOCKED) and remaining, resetMs, retryAfterMs, delayMs as
--   little-endian doubles (whole numbers, so exact). batch-codec.ts decodes it.

-- The server clock first, so that a call past its deadline reads and writes nothing.
local time = redis.call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)
if ARGV[1] ~= '' and serverNow > tonumber(ARGV[1]) then return struct.pack('<d', serverNow) .. 'expired' end

local keys, arg = readBatchKeys(2)
local policies
policies, arg = readPolicies(arg)
-- How far past its state's lapse each policy's record may be kept (writeRecord's padMs): the time
-- 16 units take to refill, at most a sixteenth of the period. A bucket's state (GCRA, token or
-- leaky bucket) lapses one emission interval (periodMs / limit) later with every unit it admits, so
-- with a pad of a sixteenth of its ttl alone, a key taking units faster than it refills needs a new
-- expiry on nearly every write; with this one, once in 8 to 16 units. The price, a key kept up to 16
-- emission intervals past its lapse, is small beside a window's record, kept to its window's end.
for i = 1, #policies do
  local policy = policies[i]
  policy.padMs = min(16 * policy.periodMs / policy.limit, policy.periodMs / 16)
end

-- Read phase: every key's record, one MGET per read group (keys of one slot; on a standalone
-- server all keys), in chunks so no call has too many arguments. Everything is read and checked
-- before anything is written, so a failing read (a key the node does not own, a corrupt record)
-- fails the whole call with no write done; a key twice in the batch is read twice. `texts` then
-- follows every write, so requests that share a key see each other's writes, as if each ran as its
-- own call; a record is decoded when its request is decided.
local MGET_CHUNK = 1000
local texts = {}
-- Record keys whose leases are live ('L'): their ledgers are read too, still before any write.
local leasedKeys = {}
local groupCount = tonumber(ARGV[arg])
arg = arg + 1
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[arg + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do
    readRecords(keys, from, min(groupEnd, from + MGET_CHUNK - 1), texts, leasedKeys)
  end
  groupStart = groupEnd + 1
end
arg = arg + groupCount
-- The lease arithmetic, made only for a call that needs it (see scripts.ts: leasedExact).
local readLedgers, decideLeased
if #leasedKeys > 0 then
  readLedgers, decideLeased = leasedExact()
  readLedgers(leasedKeys, texts)
end

-- One request's inputs and evaluation, refilled for every request (tables are the costly part):
-- its policies, keys, records (nil when absent; else the position's record buffer, its state in the
-- position's state buffer) and the expiries they carry.
local requestPolicies = {}
local requestKeys = {}
local requestRecords = {}
local requestExpiries = {}
local recordBuffers = {}
local stateBuffers = {}
local evaluation = create_evaluation()
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

-- The reply's flag bits, and each request's allowed byte.
local REPLY_ALLOWED = 1
local REPLY_BLOCKED = 2
local REQUEST_BYTE = { [true] = '\1', [false] = '\0' }

-- The reply so far (see the top of this file), and the index in `keys` of the last key decided.
local out = { struct.pack('<d', serverNow) }
local n = 1
local keyIndex = 0
-- The one-policy request's usual state, any other record and its state, and where its step writes.
local singleState = {}
local singleRecord = { blockedUntil = 0, state = nil }
local singleRecordState = {}
local singleStep = createStepResult()
-- The one-policy list a leased request is decided with (made by the first one).
local singlePolicies

local runCount = tonumber(ARGV[arg])
arg = arg + 1
for run = 1, runCount do
  local now = ARGV[arg] == '' and serverNow or tonumber(ARGV[arg])
  local cost = tonumber(ARGV[arg + 1])
  local count = tonumber(ARGV[arg + 2])
  arg = arg + 3
  local requests = tonumber(ARGV[arg + count])
  -- A clock ahead of the server's (tests inject `now`) keeps records that much longer, so Redis
  -- never forgets a record before the request's own clock says it expired.
  local lead = max(0, now - serverNow)
  if count == 1 then
    -- One policy (the usual request): evaluateKeyInto for one policy, written out here in the main
    -- chunk (where its variables are registers), because in Redis evaluateKeyInto's tables and calls
    -- cost more than the step they serve. The request is allowed exactly when its step is (and no
    -- block holds), a denied request keeps its record's state, and no step is re-read as a peek
    -- (that is for a policy that allowed while another denied).
    local policy = policies[tonumber(ARGV[arg])]
    local algorithm = ALGORITHMS[policy.algorithm]
    local step, ttlOf, blockMs = algorithm.step, algorithm.ttl, policy.blockMs
    for r = 1, requests do
      keyIndex = keyIndex + 1
      local key = keys[keyIndex]
      local stored = texts[key]
      local state, blockedUntil, expiresAt, leased = nil, 0, false, false
      if stored then
        -- decodeRecordInto's usual record without the call (see there); singleState never holds
        -- more than 5 numbers, so nothing else is left behind.
        local layout = SHORT_LAYOUTS[#stored]
        local tag
        if layout then
          tag, expiresAt, singleState[1], singleState[2], singleState[3], singleState[4], singleState[5] =
            structUnpack(layout, stored)
          singleState[(#stored - 1) / 8] = nil
        end
        if tag == TAG_S then
          state = singleState
        else
          expiresAt = decodeRecordInto(stored, singleRecord, singleRecordState)
          state = singleRecord.state
          leased = singleRecord.leased
          if singleRecord.blockedUntil > now then blockedUntil = singleRecord.blockedUntil end
        end
      end
      if leased then
        singlePolicies = singlePolicies or {}
        singlePolicies[1] = policy
        local lease = decideLeased(texts, keys, keyIndex, singlePolicies, now, cost, lead, serverNow)
        local result = lease.results[1]
        n = n + 1
        out[n] = structPack('<BBdddd', lease.allowed and 1 or 0, result.allowed and REPLY_ALLOWED or 0, result.remaining,
          result.resetMs, result.retryAfterMs, 0)
      else
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
        -- An allowed step's state is as good as none after max(1, resetMs), so its ttl is at most
        -- that: an expiry that far away is kept without calling ttl.
        local ttl = resetMs > 1 and resetMs or 1
        if not (allowed and blockedUntil == 0 and expiresAt and expiresAt >= serverNow + lead + ttl) then
          ttl = state == nil and 1 or ttlOf(state, now, policy)
          if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
        end
        texts[key] = writeRecord(key, stored, expiresAt, blockedUntil, state, ttl + lead, serverNow, policy.padMs)
        n = n + 1
        out[n] = structPack('<BBdddd', allowed and 1 or 0, flags, remaining, resetMs, retryAfterMs, delayMs)
      end
    end
  else
    sizeRequest(count)
    for i = 1, count do requestPolicies[i] = policies[tonumber(ARGV[arg + i - 1])] end
    for r = 1, requests do
      -- The request's records (its keys come next in `keys`), decided, written and replied to.
      local leased = false
      for i = 1, count do
        keyIndex = keyIndex + 1
        local key = keys[keyIndex]
        local text = texts[key]
        requestKeys[i] = key
        if text then
          requestRecords[i] = recordBuffers[i]
          requestExpiries[i] = decodeRecordInto(text, recordBuffers[i], stateBuffers[i])
          if recordBuffers[i].leased then leased = true end
        else
          requestRecords[i] = nil
          requestExpiries[i] = false
        end
      end

      n = n + 1
      if leased then
        local lease = decideLeased(texts, keys, keyIndex - count + 1, requestPolicies, now, cost, lead, serverNow)
        out[n] = REQUEST_BYTE[lease.allowed]
        local results = lease.results
        for i = 1, count do
          local result = results[i]
          n = n + 1
          out[n] = structPack('<Bdddd', result.allowed and REPLY_ALLOWED or 0, result.remaining, result.resetMs, result.retryAfterMs, 0)
        end
      else
        evaluate_key_into(requestRecords, now, cost, requestPolicies, evaluation)

        local records, ttlMs = evaluation.records, evaluation.ttlMs
        for i = 1, count do
          local key = requestKeys[i]
          local record = records[i]
          local padMs = requestPolicies[i].padMs
          local ttl = ttlMs[i] + lead
          texts[key] = writeRecord(key, texts[key], requestExpiries[i], record.blockedUntil, record.state, ttl, serverNow, padMs)
        end

        out[n] = REQUEST_BYTE[evaluation.allowed]
        local results = evaluation.results
        for i = 1, count do
          local result = results[i]
          local flags = (result.allowed and REPLY_ALLOWED or 0) + (result.blocked and REPLY_BLOCKED or 0)
          n = n + 1
          out[n] = structPack('<Bdddd', flags, result.remaining, result.resetMs, result.retryAfterMs, result.delayMs)
        end
      end
    end
  end
  arg = arg + count + 1
end
return table.concat(out)
