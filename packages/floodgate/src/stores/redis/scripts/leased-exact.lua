-- Exact decisions of keys with live leases, for runner.lua (scripts.ts puts this file after lease.lua,
-- both inside the function leasedExact, which returns readLedgers and decideLeased: a call that
-- meets no live lease makes none of their tables). A key's state record is tagged 'L' while its ledger holds leases
-- (record.lua; lease-runner.lua writes the tag). A plain exact step would then miss what the leases
-- hold: a token bucket would refill past `burst - held`, and a GCRA reservation, not charged to the
-- state until the lease ends, would not count at all. So a request with an 'L' record is decided
-- as the lease script decides a request without a lease (core/lease.ts, `id` 0): the ledger read,
-- its expired leases ended, and the cost charged under the same caps. Both scripts then count the
-- same units whichever decided last, and a key moves between leases and exact decisions without
-- losing or doubling a charge. A key never leased, or whose leases are over and were settled by a
-- call, carries another tag: its exact decision reads one key, as before.

local LEDGER_SUFFIX = '#l'

-- Reads the ledgers of `leased` (record keys tagged 'L') into `texts`, each checked. One GET each:
-- a ledger shares its record's slot, and this path is the rare one.
local function readLedgers(leased, texts)
  for i = 1, #leased do
    local ledgerKey = leased[i] .. LEDGER_SUFFIX
    local text = call('GET', ledgerKey)
    if text then checkRecord(text, ledgerKey) end
    texts[ledgerKey] = text
  end
end

-- What decideLeased keeps between requests (it calls nothing that could re-enter it).
local leasedAsk = { id = 0, want = 0, need = 0, leaseMs = 0, returnId = 0, returnUnused = 0 }
local leasedRecords, leasedLedgers, leasedExpiries, leasedNames = {}, {}, {}, {}
local leasedRecordBuffers, leasedStateBuffers = {}, {}
local leasedOut = createLeaseEvaluation()

-- Decides `cost` of the request whose keys are keys[from .. from + #policies - 1] (their texts in
-- `texts`; a ledger not read is none, see readLedgers) at `now`, writes its records and ledgers
-- (texts follows) and returns the lease evaluation (leaseKey's `out`, valid until the next call).
local function decideLeased(texts, keys, from, policies, now, cost, lead, serverNow)
  local count = #policies
  for i = 1, 2 * count do
    local key
    if i <= count then key = keys[from + i - 1] else key = keys[from + i - 1 - count] .. LEDGER_SUFFIX end
    leasedNames[i] = key
    local text = texts[key]
    local record = nil
    leasedExpiries[i] = false
    if text then
      record = leasedRecordBuffers[i]
      if record == nil then
        record = { blockedUntil = 0, state = nil }
        leasedRecordBuffers[i] = record
        leasedStateBuffers[i] = {}
      end
      leasedExpiries[i] = decodeRecordInto(text, record, leasedStateBuffers[i])
    end
    if i <= count then leasedRecords[i] = record else leasedLedgers[i - count] = record and record.state or nil end
  end
  leasedAsk.need = cost
  local lease = leaseKey(leasedRecords, leasedLedgers, now, leasedAsk, policies, leasedOut)
  for i = 1, 2 * count do
    local key = leasedNames[i]
    local record = lease.records[i]
    local leased = i <= count and lease.records[count + i].state ~= nil
    local padMs = policies[i <= count and i or i - count].padMs
    local ttl = lease.ttlMs[i] + lead
    texts[key] = writeRecord(key, texts[key], leasedExpiries[i], record.blockedUntil, record.state, ttl, serverNow, padMs, leased)
  end
  return lease
end
