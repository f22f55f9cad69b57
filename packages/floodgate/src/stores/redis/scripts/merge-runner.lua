-- The merge runner: merges a batch of requests' units into their keys' records in one atomic call,
-- and answers every record after the merge; RedisStore.merge runs it (merge-codec.ts encodes the call
-- and decodes the reply). Appended after prelude.lua, the algorithm files, record.lua and merge.lua.
-- Each request is MemoryStore.mergeOne's twin: the same records, applied flags and ttls.
--
-- Keys: KEYS, then ARGV[2 .. 1 + ARGV[1]]: every policy key, request after request (on a Cluster only
--   the routing slot's keys are declared, as runner.lua does; the script's allow-cross-slot-keys flag
--   lets it touch the others, which the node serves). Beside each record, `<key>:wo` holds the last
--   seq applied per origin (idempotency), with the record's expiry, at most MAX_ORIGINS of them: a
--   string, so that it is read with the records (MGET) and written in one command (see ORIGIN_HEAD).
-- ARGV after those keys:
--   policy count, then per policy: algorithm, limit, periodMs, burst, shaping (1/0), blockMs (read by
--   batch-args.lua, shared with runner.lua; a merge does not start blocks);
--   read group count, then each group's key count (one MGET per slot, as runner.lua);
--   request count; origin count, then each origin; then one binary string of the requests' numbers
--   (little-endian doubles, unpacked with one call each: tonumber of a text costs several times
--   more), per request: now (NaN = server clock), units, origin (1-based index into the origins,
--   0 = none), seq, policy count, policy indexes.
-- Returns one binary string: the server clock (ms) as a little-endian double, then per request a
--   byte applied (1/0), then per policy a byte with the state's length (255: no state), blockedUntil
--   and the state's numbers, as little-endian doubles.

local MAX_ORIGINS = 64
local NO_STATE = 255
-- An origins string is a run of entries: ORIGIN_HEAD (the origin's last seq, the origin's length in
-- bytes) and the origin's bytes. A known origin's seq is overwritten where it stands.
local ORIGIN_HEAD = '<dH'
local ORIGIN_HEAD_BYTES = 10
local ORIGINS_SUFFIX = ':wo'
-- The reply's formats of a policy with a state of 0 to 4 numbers (every mergeable algorithm's).
local REPLY_FORMATS = { [0] = '<Bd', '<Bdd', '<Bddd', '<Bdddd', '<Bddddd' }
local sub = string.sub
-- A request's numbers before its policy indexes (see the arguments above).
local REQUEST_HEAD = '<ddddd'
local REQUEST_HEAD_BYTES = 40
-- SETRANGE offsets as text by position: a number argument to redis.call is converted on every call.
local offsetTexts = { '0' }

-- Reads the origins strings of the keys[from .. to] (keys of one slot) that `withOrigin` marks, in
-- one MGET: into `origins` by record key (false: none), their key names into `originKeys`.
local function readOrigins(keys, from, to, withOrigin, origins, originKeys)
  local names = {}
  for i = from, to do
    if withOrigin[i] then
      local name = keys[i] .. ORIGINS_SUFFIX
      names[#names + 1] = name
      originKeys[keys[i]] = name
    end
  end
  if #names == 0 then return end
  local values = call('MGET', unpack(names))
  local at = 0
  for i = from, to do
    if withOrigin[i] then
      at = at + 1
      origins[keys[i]] = values[at]
    end
  end
end

-- The last seq applied from `origin` in the origins string `text` (false: none), where that seq
-- stands (false: nowhere), and how many origins the string holds. A string that does not parse
-- (another program wrote it) counts as full, so the next origin replaces it.
local function findOrigin(text, origin)
  if not text then return false, false, 0 end
  local length, size = #text, #origin
  local at, count = 1, 0
  while at + ORIGIN_HEAD_BYTES - 1 <= length do
    local seq, bytes = structUnpack(ORIGIN_HEAD, text, at)
    local from = at + ORIGIN_HEAD_BYTES
    if bytes == size and sub(text, from, from + bytes - 1) == origin then return seq, at, count end
    count = count + 1
    at = from + bytes
  end
  if at ~= length + 1 then return false, false, MAX_ORIGINS end
  return false, false, count
end

-- Records `seq` as `origin`'s last in the origins string `text` under `name` (`at`: where its seq
-- stands, or false for a new origin; `count`: the origins it holds), to expire with the record just
-- written (`written`, whose stored copy carried `expiresAt`). Returns the string the key now holds,
-- or nil when it was changed in place (then it is read again if the batch has its key twice).
local function writeOrigins(name, text, at, count, origin, seq, written, expiresAt)
  local keptUntil = structUnpack('<d', written, 2)
  if at then
    -- Only the seq changes, written where it stands; when the record's expiry moved, PEXPIREAT moves
    -- this string's with it. No new string is built: two cheap commands cost no more than SET ... PXAT.
    local offset = offsetTexts[at]
    if not offset then
      offset = tostring(at - 1)
      offsetTexts[at] = offset
    end
    call('SETRANGE', name, offset, structPack('<d', seq))
    if keptUntil ~= expiresAt then call('PEXPIREAT', name, expiryText(keptUntil)) end
    return nil
  else
    local entry = structPack(ORIGIN_HEAD, seq, #origin) .. origin
    -- A new origin: past MAX_ORIGINS the record forgets them all and starts again (key-table.ts).
    if text and count < MAX_ORIGINS then text = text .. entry else text = entry end
  end
  call('SET', name, text, 'PXAT', expiryText(keptUntil))
  return text
end

local time = call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)

local keys, arg = readBatchKeys(1)
local policies
policies, arg = readPolicies(arg)
local groupCount = tonumber(ARGV[arg])
local groupsAt = arg + 1
arg = groupsAt + groupCount

local requests = tonumber(ARGV[arg])
local originsAt = arg + 1
local numbers = ARGV[originsAt + tonumber(ARGV[originsAt]) + 1]

-- The keys of requests with an origin, whose origins strings are read with the records.
local withOrigin = {}
local scan, scanKey = 1, 0
for _ = 1, requests do
  local _, _, originIndex, _, count = structUnpack(REQUEST_HEAD, numbers, scan)
  if originIndex > 0 then
    for i = scanKey + 1, scanKey + count do withOrigin[i] = true end
  end
  scanKey = scanKey + count
  scan = scan + REQUEST_HEAD_BYTES + 8 * count
end

-- Every record and origins string is read (and every record checked) before anything is written,
-- as runner.lua does.
local MGET_CHUNK = 1000
local texts = {}
local origins = {}
local originKeys = {}
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[groupsAt + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do
    local to = min(groupEnd, from + MGET_CHUNK - 1)
    readRecords(keys, from, to, texts)
    readOrigins(keys, from, to, withOrigin, origins, originKeys)
  end
  groupStart = groupEnd + 1
end

local out = { structPack('<d', serverNow) }
local outAt = 1
local keyIndex = 0
-- A record and its state decoded, refilled for every key: a merge reads its state and answers a new one.
local record = { blockedUntil = 0, state = nil }
local stateBuffer = {}
-- The result a merge's step writes into (see MERGES): each merged state is written and answered
-- before the next merge rewrites it.
local mergeOut = createStepResult()
local at = 1
for _ = 1, requests do
  local now, units, originIndex, seq, count = structUnpack(REQUEST_HEAD, numbers, at)
  at = at + REQUEST_HEAD_BYTES
  -- NaN (the only number unequal to itself): the server's clock.
  if now ~= now then now = serverNow end
  local origin = originIndex > 0 and ARGV[originsAt + originIndex] or ''
  -- A `now` ahead of the server's (tests) keeps the record that much longer, as runner.lua does.
  local lead = max(0, now - serverNow)
  -- The applied byte goes first; it is known once every policy is merged.
  outAt = outAt + 1
  local appliedAt = outAt
  local applied = true
  for i = 1, count do
    local p = policies[structUnpack('<d', numbers, at)]
    at = at + 8
    keyIndex = keyIndex + 1
    local key = keys[keyIndex]
    local text = texts[key]
    local state, blockedUntil, expiresAt = nil, 0, false
    if text then
      expiresAt = decodeRecordInto(text, record, stateBuffer)
      state = record.state
      if record.blockedUntil > now then blockedUntil = record.blockedUntil end
    end
    local take = units
    local seenAt, seenCount = false, 0
    if origin ~= '' then
      local last
      local seen = origins[key]
      if seen == nil then
        seen = call('GET', originKeys[key])
        origins[key] = seen
      end
      last, seenAt, seenCount = findOrigin(seen, origin)
      if last and seq <= last then
        take = 0
        applied = false
      end
    end
    if take ~= 0 then
      state = MERGES[p.algorithm](state, now, take, p, mergeOut)
      local ttl = state == nil and 1 or ALGORITHMS[p.algorithm].ttl(state, now, p)
      if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
      local written = writeRecord(key, text, expiresAt, blockedUntil, state, ttl + lead, serverNow)
      texts[key] = written
      -- A merge always leaves a state, so `written` is a record.
      if origin ~= '' then
        origins[key] = writeOrigins(originKeys[key], origins[key], seenAt, seenCount, origin, seq, written, expiresAt)
      end
    end
    outAt = outAt + 1
    if state == nil then
      out[outAt] = structPack('<Bd', NO_STATE, blockedUntil)
    else
      local length = #state
      local format = REPLY_FORMATS[length]
      if format then
        out[outAt] = structPack(format, length, blockedUntil, state[1], state[2], state[3], state[4])
      else
        out[outAt] = structPack('<Bd', length, blockedUntil) .. structPack('<' .. string.rep('d', length), unpack(state))
      end
    end
  end
  out[appliedAt] = applied and '\1' or '\0'
end
return table.concat(out)
