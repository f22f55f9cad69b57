-- Records: how one (user key, policy) is kept in Redis — its binary text, its padded expiry, and
-- the one way a record is written. Every script that reads or writes a policy key goes through here.
--
-- A record is one string: a tag byte, the key's expiry (server ms, see paddedExpiry), then numbers,
-- all little-endian doubles (exact, like %.17g text, but several times cheaper to encode and decode):
--   'S' expiry, the state's numbers            (the usual record: no block)
--   'B' expiry, blockedUntil, the state's numbers
--   'N' expiry, blockedUntil                   (a block without a state)
--   'L' expiry, blockedUntil, the state's numbers (none: no state yet), written while leases are
--       live on the key (its ledger, key .. '#l', is not empty): an exact decision that reads it
--       must read the ledger too (runner.lua), and one that reads any other tag need not, so the
--       usual exact decision reads one key

local RECORD_CHUNK = 64
local TAG_S, TAG_B, TAG_N, TAG_L = string.byte('SBNL', 1, 4)
local byte, structPack, structUnpack = string.byte, struct.pack, struct.unpack
local recordFormats = {}
-- The formats of the usual records, found without a call (a call costs more than a table lookup
-- here): an 'S' record of 1 to 4 numbers to pack (SHORT_RECORDS[count]), and by its length the
-- whole of a record of 0 to 4 numbers to unpack (SHORT_LAYOUTS).
local SHORT_RECORDS = { '<Bdd', '<Bddd', '<Bdddd', '<Bddddd' }
local SHORT_LAYOUTS = { [9] = '<Bd', [17] = '<Bdd', [25] = '<Bddd', [33] = '<Bdddd', [41] = '<Bddddd' }

-- The struct format of `count` doubles after `head` (a format prefix such as 'Bd': tag, expiry).
-- Long states go in chunks of RECORD_CHUNK numbers, which keeps every struct call far below Lua's
-- limit on values per call.
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
    state[1], state[2], state[3], state[4], state[5] = structUnpack(recordFormat(count, ''), text, at)
    length = max(length, count + 1)
  else
    for i = 1, count do state[i] = structUnpack('<d', text, at + 8 * (i - 1)) end
  end
  for i = count + 1, length do state[i] = nil end
  return state
end

-- Fails the call unless `text`, stored under `key`, is a record.
local function checkRecord(text, key)
  local tag, count = byte(text, 1), (#text - 9) / 8
  if count ~= floor(count) or count < 0 or (tag ~= TAG_S and (tag ~= TAG_B and tag ~= TAG_N and tag ~= TAG_L or count < 1)) then
    error('Floodgate: ' .. key .. ' does not hold a Floodgate record (another program wrote it); delete the key', 0)
  end
end

local call = redis.call

-- Reads the texts of keys[from .. to] (keys of one slot) into `texts` (false: no record), each
-- checked, so that a corrupt record fails the call before anything is written. With `leased`, the
-- keys whose record says leases are live ('L') are appended to it.
local function readRecords(keys, from, to, texts, leased)
  local values = call('MGET', unpack(keys, from, to))
  for i = from, to do
    local key = keys[i]
    local text = values[i - from + 1]
    -- The usual record passes without a call.
    if text and not (SHORT_LAYOUTS[#text] and byte(text, 1) == TAG_S) then
      checkRecord(text, key)
      if leased and byte(text, 1) == TAG_L then leased[#leased + 1] = key end
    end
    texts[key] = text
  end
end

-- Decodes the record in `text` (checked) into `record`, its state into `state`, and returns the
-- expiry it carries; `record.leased` tells an 'L' record.
local function decodeRecordInto(text, record, state)
  local length = #text
  local layout = SHORT_LAYOUTS[length]
  if layout then
    -- A record of 0 to 4 numbers, tag included, in one struct call (string.byte would be one more
    -- call), which also returns the position after the last number: it lands at index count + 1
    -- ((length - 1) / 8) and is cleared, with what an earlier, longer state left.
    local stateLength = #state
    local tag, expiresAt
    tag, expiresAt, state[1], state[2], state[3], state[4], state[5] = structUnpack(layout, text)
    -- Whatever the tag: the block path below measures the state with #, which cannot see past the
    -- holes the unpack may leave, so a longer state's numbers must not outlive this line.
    for i = 6, stateLength do state[i] = nil end
    if tag == TAG_S then
      state[(length - 1) / 8] = nil
      record.blockedUntil = 0
      record.state = state
      record.leased = false
      return expiresAt
    end
  end
  local tag, count = byte(text, 1), (length - 9) / 8
  local expiresAt = structUnpack('<d', text, 2)
  record.leased = tag == TAG_L
  if tag == TAG_S then
    record.blockedUntil = 0
    record.state = decodeStateInto(state, text, 10, count)
  else
    record.blockedUntil = structUnpack('<d', text, 10)
    record.state = (tag == TAG_B or tag == TAG_L and count > 1) and decodeStateInto(state, text, 18, count - 1) or nil
  end
  return expiresAt
end

-- The record's text ('L' when `leased`).
local function encodeRecord(blockedUntil, state, expiresAt, leased)
  local blockTag = leased and TAG_L or TAG_B
  if state == nil then return structPack('<Bdd', leased and TAG_L or TAG_N, expiresAt, blockedUntil) end
  local count = #state
  if blockedUntil == 0 and not leased and SHORT_RECORDS[count] then
    -- struct.pack reads as many numbers as its format names: the nils after a short state are ignored.
    return structPack(SHORT_RECORDS[count], TAG_S, expiresAt, state[1], state[2], state[3], state[4])
  end
  local plain = blockedUntil == 0 and not leased
  if count <= RECORD_CHUNK then
    if plain then return structPack(recordFormat(count, 'Bd'), TAG_S, expiresAt, unpack(state)) end
    return structPack(recordFormat(count, 'Bdd'), blockTag, expiresAt, blockedUntil, unpack(state))
  end
  local parts = {}
  if plain then parts[1] = structPack('<Bd', TAG_S, expiresAt)
  else parts[1] = structPack('<Bdd', blockTag, expiresAt, blockedUntil) end
  for from = 1, count, RECORD_CHUNK do
    local to = min(count, from + RECORD_CHUNK - 1)
    parts[#parts + 1] = structPack(recordFormat(to - from + 1, ''), unpack(state, from, to))
  end
  return table.concat(parts)
end

-- A record's expiry is padded: the time it must be kept until, rounded up to a grid of
-- EXPIRY_GRID_MS doubled while it stays within a sixteenth of the record's ttl (1 s for ttls under
-- 32 s, 128 s for an hour) or within the writer's `padMs`. Setting a key's expiry costs about as
-- much as the rest of its SET, so a write whose record need not be kept past the stored expiry keeps
-- it: with the pad, most writes of a busy key do, and a window's record needs one expiry all window
-- long. A bucket's state lapses later with every unit it admits, however short its ttl, which is
-- what `padMs` is for (see runner.lua). Keeping a record longer is harmless: stepping a state after
-- its ttl is the same as stepping no state.
local EXPIRY_GRID_MS = 1000
-- PXAT texts by expiry: a number argument to redis.call is converted to text on every call.
local expiryTexts = {}

-- The expiry for a record kept until `at` (server ms), `ttl` ms from now.
local function paddedExpiry(at, ttl, padMs)
  local grid = EXPIRY_GRID_MS
  while grid * 32 <= ttl or grid * 2 <= padMs do grid = grid * 2 end
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

-- Writes a record under `key`, which holds `stored` (false or nil: nothing) carrying `expiresAt`,
-- to be kept `ttl` ms from the server's `serverNow` and padded by less than max(grid, `padMs`)
-- (nil: 0; see paddedExpiry); no state and no block deletes it, unless `leased` (leases are live on
-- the key: an 'L' record, kept even without a state). Returns the text the key now holds (false: none).
local function writeRecord(key, stored, expiresAt, blockedUntil, state, ttl, serverNow, padMs, leased)
  if state == nil and blockedUntil == 0 and not leased then
    if stored then call('DEL', key) end
    return false
  end
  -- Expiries and the server clock are whole ms, so comparing with ttl is comparing with ceil(ttl).
  local keepsExpiry = expiresAt and expiresAt >= serverNow + ttl
  if not keepsExpiry then
    ttl = ceil(ttl)
    expiresAt = paddedExpiry(serverNow + ttl, ttl, padMs or 0)
  end
  -- encodeRecord's usual record without the call.
  local format = blockedUntil == 0 and state and not leased and SHORT_RECORDS[#state]
  local text
  if format then
    text = structPack(format, TAG_S, expiresAt, state[1], state[2], state[3], state[4])
  else
    text = encodeRecord(blockedUntil, state, expiresAt, leased)
  end
  if not keepsExpiry then
    -- A record of the stored one's length is overwritten in place and given its new expiry:
    -- PEXPIREAT updates the key's entry in the table of expiries, where SET ... PXAT removes and
    -- re-adds it and rewrites the command for propagation.
    if stored and #text == #stored then
      call('SETRANGE', key, '0', text)
      call('PEXPIREAT', key, expiryText(expiresAt))
    else
      call('SET', key, text, 'PXAT', expiryText(expiresAt))
    end
  elseif text ~= stored then
    -- One of the same length (the usual case) is overwritten in place: SETRANGE keeps the expiry as
    -- KEEPTTL does but answers an integer (SET's status reply costs Lua a table) and reuses the
    -- stored string. An unchanged record is not written at all.
    if stored and #text == #stored then
      call('SETRANGE', key, '0', text)
    else
      call('SET', key, text, 'KEEPTTL')
    end
  end
  return text
end
