-- The merge runner: merges a batch of requests' units into their keys' records in one atomic call,
-- and answers every record after the merge; RedisStore.merge runs it (merge-codec.ts encodes the call
-- and decodes the reply). Appended after prelude.lua, the algorithm files, record.lua and merge.lua.
-- Each request is MemoryStore.mergeOne's twin: the same records, applied flags and ttls.
--
-- Keys: KEYS, then ARGV[2 .. 1 + ARGV[1]]: every policy key, request after request (on a Cluster only
--   the routing slot's keys are declared, as runner.lua does; the script's allow-cross-slot-keys flag
--   lets it touch the others, which the node serves).
-- Idempotency: one token per slot group and origin, `<group's token prefix><origin>`, whose prefix
--   carries a hash tag of the group's slot (slot-tags.ts), so the token lives, and moves in a
--   resharding, with the keys it guards. It holds the seqs that origin applied in that slot, as runs
--   of consecutive seqs (a flush numbers its keys in a row, so a standalone server's token is a run
--   or two), each with the expiry of the records it wrote: a seq is applied once per slot, and an
--   origin's seqs grow with every request (store.ts), so that is once per request. The per-key origin
--   records this replaces were about half of a merge's Redis CPU (docs/sync.md).
-- ARGV after those keys:
--   policy count, then per policy: algorithm, limit, periodMs, burst, shaping (1/0), blockMs (read by
--   batch-args.lua, shared with runner.lua; a merge does not start blocks);
--   read group count, then each group's key count (one MGET per slot, as runner.lua), then each
--   group's token prefix, then each group's origins (their indexes, space-separated: the tokens it
--   reads);
--   request count; origin count, then each origin; then one binary string of the requests' numbers
--   (little-endian doubles, unpacked with one call each: tonumber of a text costs several times
--   more), per request: now (NaN = server clock), units, origin (1-based index into the origins,
--   0 = none), seq, policy count, policy indexes.
-- Returns one binary string: the server clock (ms) as a little-endian double, then per request a
--   byte applied (1/0), then per policy its record after the call (record.lua's text: merge-codec.ts
--   decodes it) after its length as a little-endian uint16 (0: no record).

-- A key's answer is its record's length (two bytes) and text; no record is a length of 0.
local NO_RECORD = '\0\0'
local LENGTHS = {}
-- A token is a run of entries RUN (first seq, last seq, kept until: server ms), sorted by first seq.
local RUN = '<ddd'
local RUN_BYTES = 24
-- The most runs a token keeps; past it the lowest seqs are forgotten (a resend of those would count
-- again). A flush's seqs make one run per slot, and runs that meet join, so only a Cluster, whose
-- slots see a few keys of each flush, comes near it: 256 of one origin's flushes that wrote the slot.
local MAX_RUNS = 256
-- A request's numbers before its policy indexes (see the arguments above).
local REQUEST_HEAD = '<ddddd'
local REQUEST_HEAD_BYTES = 40
-- The head and the first policy index, in one call where the numbers hold that many (a request has a
-- policy or more, so its own first index is there).
local REQUEST_HEAD_FIRST = '<dddddd'

-- A token's runs, read from its text (false: none): { los, his, kept, top }, `top` the highest seq
-- it holds; a run kept until `serverNow` or earlier (its records expired) is gone. A text that does
-- not parse (another program wrote it) counts as none.
local function readToken(text, serverNow)
  local token = { los = {}, his = {}, kept = {}, top = -1, newTop = -1, newLos = {}, newHis = {}, keptUntil = 0 }
  if not text or #text % RUN_BYTES ~= 0 then return token end
  local los, his, kept = token.los, token.his, token.kept
  local n = 0
  for at = 1, #text, RUN_BYTES do
    local lo, hi, keptUntil = structUnpack(RUN, text, at)
    if keptUntil > serverNow then
      n = n + 1
      los[n], his[n], kept[n] = lo, hi, keptUntil
      if hi > token.top then token.top = hi end
    end
  end
  return token
end

-- Whether the token has applied `seq`: before this call (its runs) or in it (its new runs). A
-- flush's seqs grow, so the usual answer is found by comparing with the highest of each.
local function tokenHas(token, seq)
  if seq > token.top and seq > token.newTop then return false end
  local los, his = token.los, token.his
  for i = 1, #los do
    if seq >= los[i] and seq <= his[i] then return true end
  end
  los, his = token.newLos, token.newHis
  for i = 1, #los do
    if seq >= los[i] and seq <= his[i] then return true end
  end
  return false
end

-- Notes `seq` as applied in this call; consecutive seqs (a flush's usual order) extend one new run.
local function tokenAdd(token, seq)
  if seq > token.newTop then token.newTop = seq end
  local newHis = token.newHis
  local n = #newHis
  if n > 0 and newHis[n] + 1 == seq then
    newHis[n] = seq
  else
    token.newLos[n + 1] = seq
    newHis[n + 1] = seq
  end
end

-- Writes a token that applied seqs in this call: its runs and the new ones, sorted, those that meet
-- joined, at most MAX_RUNS; kept until the latest of its runs.
local function writeToken(name, token)
  local runs = {}
  local los, his, kept = token.los, token.his, token.kept
  for i = 1, #los do runs[#runs + 1] = { los[i], his[i], kept[i] } end
  for i = 1, #token.newLos do runs[#runs + 1] = { token.newLos[i], token.newHis[i], token.keptUntil } end
  table.sort(runs, function(a, b) return a[1] < b[1] end)
  local joined = {}
  for i = 1, #runs do
    local run = runs[i]
    local last = joined[#joined]
    if last and last[2] + 1 >= run[1] then
      if run[2] > last[2] then last[2] = run[2] end
      if run[3] > last[3] then last[3] = run[3] end
    else
      joined[#joined + 1] = run
    end
  end
  local from = max(1, #joined - MAX_RUNS + 1)
  local parts = {}
  local keptUntil = 0
  for i = from, #joined do
    local run = joined[i]
    parts[#parts + 1] = structPack(RUN, run[1], run[2], run[3])
    if run[3] > keptUntil then keptUntil = run[3] end
  end
  call('SET', name, table.concat(parts), 'PXAT', expiryText(keptUntil))
end

local time = call('TIME')
local serverNow = tonumber(time[1]) * 1000 + floor(tonumber(time[2]) / 1000)

local keys, arg = readBatchKeys(1)
local policies
policies, arg = readPolicies(arg)
local groupCount = tonumber(ARGV[arg])
local groupsAt = arg + 1
local prefixesAt = groupsAt + groupCount
local groupOriginsAt = prefixesAt + groupCount
arg = groupOriginsAt + groupCount

local requests = tonumber(ARGV[arg])
local originsAt = arg + 1
local numbers = ARGV[originsAt + tonumber(ARGV[originsAt]) + 1]

-- The token names (by group, then origin index) the requests with an origin need: they are read
-- with the records.
local tokenNames = {}
for g = 1, groupCount do
  local names
  for index in string.gmatch(ARGV[groupOriginsAt + g - 1], '%d+') do
    local originIndex = tonumber(index)
    names = names or {}
    names[originIndex] = ARGV[prefixesAt + g - 1] .. ARGV[originsAt + originIndex]
  end
  tokenNames[g] = names
end

-- Every record and token is read (and every record checked) before anything is written, as
-- runner.lua does: a key the node does not serve then fails the call before it changed anything.
local MGET_CHUNK = 1000
local texts = {}
local tokens = {}
local groupStart = 1
for g = 1, groupCount do
  local groupEnd = groupStart + tonumber(ARGV[groupsAt + g - 1]) - 1
  for from = groupStart, groupEnd, MGET_CHUNK do
    readRecords(keys, from, min(groupEnd, from + MGET_CHUNK - 1), texts)
  end
  local names = tokenNames[g]
  if names then
    local byOrigin = {}
    for originIndex, name in pairs(names) do byOrigin[originIndex] = readToken(call('GET', name), serverNow) end
    tokens[g] = byOrigin
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
local numbersEnd = #numbers
-- The group of the request's keys: the next group starts after groupEnd keys.
local g, groupEnd = 1, tonumber(ARGV[groupsAt])
-- Per key, every call counts (a flush's key costs a few µs): the usual paths below avoid them.
for r = 1, requests do
  local now, units, originIndex, seq, count, first
  if at + REQUEST_HEAD_BYTES + 7 <= numbersEnd then
    now, units, originIndex, seq, count, first = structUnpack(REQUEST_HEAD_FIRST, numbers, at)
  else
    now, units, originIndex, seq, count = structUnpack(REQUEST_HEAD, numbers, at)
  end
  at = at + REQUEST_HEAD_BYTES
  -- NaN (the only number unequal to itself): the server's clock.
  if now ~= now then now = serverNow end
  -- A `now` ahead of the server's (tests) keeps the record that much longer, as runner.lua does.
  local lead = now - serverNow
  if lead < 0 then lead = 0 end
  while keyIndex + 1 > groupEnd do
    g = g + 1
    groupEnd = groupEnd + tonumber(ARGV[groupsAt + g - 1])
  end
  local token = originIndex > 0 and tokens[g][originIndex] or nil
  local take = units
  local applied = true
  -- A seq above every one the token holds (a flush's usual seq) is new without a look at its runs.
  if token and (seq <= token.top or seq <= token.newTop) and tokenHas(token, seq) then
    take = 0
    applied = false
  end
  outAt = outAt + 1
  out[outAt] = applied and '\1' or '\0'
  for i = 1, count do
    local p
    if i == 1 then p = policies[first] else p = policies[structUnpack('<d', numbers, at)] end
    at = at + 8
    keyIndex = keyIndex + 1
    local key = keys[keyIndex]
    local text = texts[key]
    if take ~= 0 then
      local state, blockedUntil, expiresAt = nil, 0, false
      if text then
        expiresAt = decodeRecordInto(text, record, stateBuffer)
        state = record.state
        if record.blockedUntil > now then blockedUntil = record.blockedUntil end
      end
      local ttl
      state, ttl = MERGES[p.algorithm](state, now, take, p, mergeOut)
      if ttl == nil then ttl = state == nil and 1 or ALGORITHMS[p.algorithm].ttl(state, now, p) end
      if blockedUntil > 0 and blockedUntil - now > ttl then ttl = blockedUntil - now end
      ttl = ttl + lead
      text = writeRecord(key, text, expiresAt, blockedUntil, state, ttl, serverNow)
      texts[key] = text
      -- A merge always leaves a state, so `text` is a record; the token outlives every record its
      -- seq wrote (a resend after the record expired would only merge into a fresh one). A record
      -- whose stored expiry covers the ttl kept it (writeRecord's rule); another carries its new one.
      if token then
        local keptUntil = expiresAt
        if not (expiresAt and expiresAt >= serverNow + ttl) then keptUntil = structUnpack('<d', text, 2) end
        if keptUntil > token.keptUntil then token.keptUntil = keptUntil end
      end
    end
    -- The answer is the record itself (merge-codec.ts decodes it), after its length: no state to
    -- encode once more, and a read (0 units, or a resend) decodes nothing here.
    outAt = outAt + 1
    if text then
      local length = #text
      local head = LENGTHS[length]
      if head == nil then
        head = structPack('<H', length)
        LENGTHS[length] = head
      end
      out[outAt] = head
      outAt = outAt + 1
      out[outAt] = text
    else
      out[outAt] = NO_RECORD
    end
  end
  if token and take ~= 0 then
    -- tokenAdd's usual case (the seq after the last) without the call.
    local newHis = token.newHis
    local n = #newHis
    if n > 0 and newHis[n] + 1 == seq then
      newHis[n] = seq
      if seq > token.newTop then token.newTop = seq end
    else
      tokenAdd(token, seq)
    end
  end
end
for g, byOrigin in pairs(tokens) do
  for originIndex, token in pairs(byOrigin) do
    if #token.newLos > 0 then writeToken(tokenNames[g][originIndex], token) end
  end
end
return table.concat(out)
