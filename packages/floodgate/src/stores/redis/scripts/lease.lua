-- Leases: the Lua twin of src/core/lease.ts (read that file for the why and docs/sync.md for the
-- proofs), the same names, the same order and the same arithmetic. lease-runner.lua reads, decodes
-- and writes around it.
--
-- A ledger is { id1, expiresAt1, units1, id2, ... }, earliest expiry first, at most MAX_LEASES.

local MAX_LEASES = 64

local LEASE_KIND = {
  ['fixed-window'] = 'charged',
  ['sliding-window'] = 'charged',
  concurrency = 'charged',
  ['token-bucket'] = 'charged',
  gcra = 'reserved',
}

-- The policy with `held` units of its burst out on leases: one table, rewritten for each step that
-- needs it (a step keeps nothing of its policy), where the TypeScript caches one per held count: a
-- table per key costs more here than the step it serves.
local shrunk = { algorithm = '', limit = 0, periodMs = 0, burst = 0, shaping = false }

local function heldPolicy(p, held)
  shrunk.algorithm, shrunk.limit, shrunk.periodMs, shrunk.shaping = p.algorithm, p.limit, p.periodMs, p.shaping
  shrunk.burst = p.burst - held
  return shrunk
end

local unbounded = {}

local function unboundedPolicy(p)
  local open = unbounded[p]
  if open == nil then
    open = { algorithm = p.algorithm, limit = p.limit, periodMs = p.periodMs, burst = math.huge, shaping = p.shaping }
    unbounded[p] = open
  end
  return open
end

local function leaseStep(state, now, cost, p, held, out)
  return ALGORITHMS[p.algorithm].step(state, now, cost, held > 0 and heldPolicy(p, held) or p, out)
end

-- The result leaseKey's peeks write into (see lease.ts).
local peek = createStepResult()

-- Per policy position, the two step results a position's state passes between as leaseKey steps
-- it (a step never writes the state it reads): stepInto(i, state) is the one not holding `state`.
-- With them, and the buffers below, a lease call allocates no table per key.
local stepPairs = {}

local function stepInto(i, state)
  local pair = stepPairs[i]
  if pair[1].state == state then return pair[2] end
  return pair[1]
end

local function leaseCapacity(p)
  if p.algorithm == 'token-bucket' or p.algorithm == 'gcra' then return p.burst end
  return max(1, p.limit)
end

local function leaseEnd(p, now)
  if p.algorithm == 'fixed-window' or p.algorithm == 'sliding-window' then
    return floor(now / p.periodMs) * p.periodMs + p.periodMs
  end
  if p.algorithm == 'concurrency' then return now + p.periodMs end
  return math.huge
end

local function windowOf(now, p)
  return floor(now / p.periodMs) * p.periodMs
end

-- The state after a lease ends (see lease.ts), stepped into position i's step results.
local function ended(state, at, leased, unused, held, p, i)
  local algorithm = ALGORITHMS[p.algorithm]
  if LEASE_KIND[p.algorithm] == 'reserved' then
    local spent = leased - unused
    if spent > 0 then return algorithm.step(state, at, spent, unboundedPolicy(p), stepInto(i, state)).state end
    return state
  end
  if p.algorithm == 'token-bucket' then
    local advanced = leaseStep(state, at, 0, p, held, stepInto(i, state)).state
    if unused > 0 then return leaseStep(advanced, at, -unused, p, held - leased, stepInto(i, advanced)).state end
    return advanced
  end
  if unused <= 0 or state == nil then return state end
  local refund = unused
  if p.algorithm == 'sliding-window' then
    refund = min(unused, state[1] == windowOf(at, p) and state[2] or 0)
  end
  if refund > 0 then return algorithm.step(state, at, -refund, p, stepInto(i, state)).state end
  return state
end

local function ledgerUnitsAfter(old, at, now)
  local units = 0
  for j = 1, #old, 3 do
    if old[j + 1] <= now and (old[j + 1] > old[at + 1] or (old[j + 1] == old[at + 1] and j >= at)) then units = units + old[j + 2] end
  end
  return units
end

local function settleMs(p)
  if p.algorithm == 'token-bucket' or p.algorithm == 'gcra' then return ceil((p.burst * p.periodMs) / p.limit) + 1 end
  return 1
end

local function lastExpiry(ledger)
  return ledger[#ledger - 1]
end

local function ledgerTtl(ledger, now, p)
  if #ledger > 0 then return max(1, lastExpiry(ledger) - now + settleMs(p)) end
  return 1
end

-- Lease entries move by hand: table.insert and table.remove are a call per number.
local function insertLease(ledger, id, expiresAt, units)
  local at = 1
  local length = #ledger
  while at <= length and ledger[at + 1] <= expiresAt do at = at + 3 end
  for j = length, at, -1 do ledger[j + 3] = ledger[j] end
  ledger[at], ledger[at + 1], ledger[at + 2] = id, expiresAt, units
end

local function removeLease(ledger, at)
  local length = #ledger
  for j = at, length - 3 do ledger[j] = ledger[j + 3] end
  ledger[length], ledger[length - 1], ledger[length - 2] = nil, nil, nil
end

-- An empty evaluation for leaseKey to fill; the runner keeps one and reuses it for every request.
local function createLeaseEvaluation()
  return { granted = 0, expiresAt = 0, returned = false, allowed = true, results = {}, records = {}, ttlMs = {} }
end

-- What leaseKey keeps per policy position between its loops, and each position's live ledger: one
-- set for every call (leaseKey calls nothing that could re-enter it).
local states, held, lives = {}, {}, {}
local NO_LEDGER = {}

-- Buffers for `count` policy positions: a pair of step results and a ledger each, and in `out` a
-- result and two records (state, ledger) each.
local function sizeLease(out, count)
  local results, records = out.results, out.records
  for i = #stepPairs + 1, count do
    stepPairs[i] = { createStepResult(), createStepResult() }
    lives[i] = {}
  end
  for i = #results + 1, count do
    results[i] = { allowed = true, remaining = 0, resetMs = 0, retryAfterMs = 0 }
  end
  for i = #records + 1, 2 * count do records[i] = { blockedUntil = 0, state = nil } end
end

-- Twin of leaseKey: records[i] (or nil) with .state, ledgers[i] (or nil), the ask's fields in `ask`.
-- Sets `out` (see createLeaseEvaluation) as the TypeScript returns its answer, in place: its records'
-- states (step results' and ledger buffers) are valid until the next call. Inputs are only read.
local function leaseKey(records, ledgers, now, ask, policies, out)
  sizeLease(out, #policies)
  local returned = false
  local full = false
  for i = 1, #policies do
    local p = policies[i]
    local state = records[i] and records[i].state
    local ledger = lives[i]
    local length = #ledger
    local units = 0
    local old = ledgers[i] or NO_LEDGER
    local live = 0
    for at = 1, #old, 3 do
      if old[at + 1] > now then
        ledger[live + 1], ledger[live + 2], ledger[live + 3] = old[at], old[at + 1], old[at + 2]
        live = live + 3
        units = units + old[at + 2]
      end
    end
    for j = live + 1, length do ledger[j] = nil end
    for at = 1, #old, 3 do
      if old[at + 1] <= now then
        state = ended(state, old[at + 1], old[at + 2], 0, units + ledgerUnitsAfter(old, at, now), p, i)
      end
    end
    if ask.returnId ~= 0 then
      for at = 1, #ledger, 3 do
        if ledger[at] == ask.returnId then
          local leased = ledger[at + 2]
          state = ended(state, now, leased, min(ask.returnUnused, leased), units, p, i)
          units = units - leased
          removeLease(ledger, at)
          returned = true
          break
        end
      end
    end
    if #ledger >= MAX_LEASES * 3 then full = true end
    states[i] = state or false
    held[i] = units
  end

  local keep = ask.id ~= 0 and not full
  local grant = 0
  local allowed = true
  if ask.need > 0 or keep then
    grant = keep and ask.want or ask.need
    for i = 1, #policies do
      local p = policies[i]
      local spare = leaseStep(states[i] or nil, now, 0, p, held[i], peek).remaining
      local share = max(1, floor(leaseCapacity(p) / (#lives[i] / 3 + 1)))
      grant = min(grant, spare, max(ask.need, share))
    end
    allowed = grant >= ask.need
    if not allowed then grant = 0 end
  end

  local results, nextRecords, ttlMs = out.results, out.records, out.ttlMs
  local expiresAt = 0
  if grant > 0 and keep then
    expiresAt = now + ask.leaseMs
    for i = 1, #policies do expiresAt = min(expiresAt, leaseEnd(policies[i], now)) end
  end
  for i = 1, #policies do
    local p = policies[i]
    local state = states[i] or nil
    if grant > 0 then
      if LEASE_KIND[p.algorithm] == 'charged' or not keep then
        state = leaseStep(state, now, grant, p, held[i], stepInto(i, state)).state
      end
      if keep then
        insertLease(lives[i], ask.id, expiresAt, grant)
        held[i] = held[i] + grant
      end
    elseif ask.need < 0 and not keep then
      state = leaseStep(state, now, ask.need, p, held[i], stepInto(i, state)).state
    end
    local result = leaseStep(state, now, allowed and 0 or ask.need, p, held[i], peek)
    if not allowed and result.allowed then result = leaseStep(state, now, 0, p, held[i], peek) end
    local denied = not allowed and not result.allowed
    local retryAfterMs = result.retryAfterMs
    if denied and held[i] > 0 then retryAfterMs = max(retryAfterMs, 1) end
    local answer = results[i]
    answer.allowed = not denied
    answer.remaining = result.remaining
    answer.resetMs = result.resetMs
    answer.retryAfterMs = denied and retryAfterMs or 0
    local record = nextRecords[i]
    record.blockedUntil = records[i] and records[i].blockedUntil or 0
    record.state = state
    local kept = 1
    if state ~= nil then kept = ALGORITHMS[p.algorithm].ttl(state, now, p) end
    ttlMs[i] = max(kept, ledgerTtl(lives[i], now, p))
  end
  for i = 1, #policies do
    local ledger = lives[i]
    local record = nextRecords[#policies + i]
    record.blockedUntil = 0
    record.state = #ledger > 0 and ledger or nil
    ttlMs[#policies + i] = ledgerTtl(ledger, now, policies[i])
  end
  out.granted, out.expiresAt, out.returned, out.allowed = grant, expiresAt, returned, allowed
  return out
end
