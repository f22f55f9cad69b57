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

local heldPolicies = {}

-- The policy with `held` units of its burst out on leases (cached by policy and held units, as the
-- TypeScript does; the cache lives for one call), and one without a tolerance.
local function heldPolicy(p, held)
  local byHeld = heldPolicies[p]
  if byHeld == nil then
    byHeld = {}
    heldPolicies[p] = byHeld
  end
  local shrunk = byHeld[held]
  if shrunk == nil then
    shrunk = { algorithm = p.algorithm, limit = p.limit, periodMs = p.periodMs, burst = p.burst - held, shaping = p.shaping }
    byHeld[held] = shrunk
  end
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

local function ended(state, at, leased, unused, held, p)
  local algorithm = ALGORITHMS[p.algorithm]
  if LEASE_KIND[p.algorithm] == 'reserved' then
    local spent = leased - unused
    if spent > 0 then return algorithm.step(state, at, spent, unboundedPolicy(p), nil).state end
    return state
  end
  if p.algorithm == 'token-bucket' then
    local advanced = leaseStep(state, at, 0, p, held).state
    if unused > 0 then return leaseStep(advanced, at, -unused, p, held - leased).state end
    return advanced
  end
  if unused <= 0 or state == nil then return state end
  local refund = unused
  if p.algorithm == 'sliding-window' then
    refund = min(unused, state[1] == windowOf(at, p) and state[2] or 0)
  end
  if refund > 0 then return algorithm.step(state, at, -refund, p, nil).state end
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

local function insertLease(ledger, id, expiresAt, units)
  local at = 1
  while at <= #ledger and ledger[at + 1] <= expiresAt do at = at + 3 end
  table.insert(ledger, at, units)
  table.insert(ledger, at, expiresAt)
  table.insert(ledger, at, id)
end

-- Twin of leaseKey: records[i] (or nil) with .state, ledgers[i] (or nil), the ask's fields in `ask`.
-- Returns { granted, expiresAt, returned, allowed, results, records, ttlMs } as the TypeScript does.
local function leaseKey(records, ledgers, now, ask, policies)
  local states, lives, held = {}, {}, {}
  local returned = false
  local full = false
  for i = 1, #policies do
    local p = policies[i]
    local state = records[i] and records[i].state
    local ledger = {}
    local units = 0
    local old = ledgers[i] or {}
    for at = 1, #old, 3 do
      if old[at + 1] > now then
        ledger[#ledger + 1] = old[at]
        ledger[#ledger + 1] = old[at + 1]
        ledger[#ledger + 1] = old[at + 2]
        units = units + old[at + 2]
      end
    end
    for at = 1, #old, 3 do
      if old[at + 1] <= now then
        state = ended(state, old[at + 1], old[at + 2], 0, units + ledgerUnitsAfter(old, at, now), p)
      end
    end
    if ask.returnId ~= 0 then
      for at = 1, #ledger, 3 do
        if ledger[at] == ask.returnId then
          local leased = ledger[at + 2]
          state = ended(state, now, leased, min(ask.returnUnused, leased), units, p)
          units = units - leased
          table.remove(ledger, at)
          table.remove(ledger, at)
          table.remove(ledger, at)
          returned = true
          break
        end
      end
    end
    if #ledger >= MAX_LEASES * 3 then full = true end
    states[i] = state or false
    lives[i] = ledger
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

  local results, out, ttlMs = {}, {}, {}
  local expiresAt = 0
  if grant > 0 and keep then
    expiresAt = now + ask.leaseMs
    for i = 1, #policies do expiresAt = min(expiresAt, leaseEnd(policies[i], now)) end
  end
  for i = 1, #policies do
    local p = policies[i]
    local state = states[i] or nil
    if grant > 0 then
      if LEASE_KIND[p.algorithm] == 'charged' or not keep then state = leaseStep(state, now, grant, p, held[i]).state end
      if keep then
        insertLease(lives[i], ask.id, expiresAt, grant)
        held[i] = held[i] + grant
      end
    elseif ask.need < 0 and not keep then
      state = leaseStep(state, now, ask.need, p, held[i]).state
    end
    local result = leaseStep(state, now, allowed and 0 or ask.need, p, held[i], peek)
    if not allowed and result.allowed then result = leaseStep(state, now, 0, p, held[i], peek) end
    local denied = not allowed and not result.allowed
    local retryAfterMs = result.retryAfterMs
    if denied and held[i] > 0 then retryAfterMs = max(retryAfterMs, 1) end
    results[i] = {
      allowed = not denied,
      remaining = result.remaining,
      resetMs = result.resetMs,
      retryAfterMs = denied and retryAfterMs or 0,
    }
    out[i] = { blockedUntil = records[i] and records[i].blockedUntil or 0, state = state }
    local kept = 1
    if state ~= nil then kept = ALGORITHMS[p.algorithm].ttl(state, now, p) end
    ttlMs[i] = max(kept, ledgerTtl(lives[i], now, p))
  end
  for i = 1, #policies do
    local ledger = lives[i]
    out[#policies + i] = { blockedUntil = 0, state = #ledger > 0 and ledger or nil }
    ttlMs[#policies + i] = ledgerTtl(ledger, now, policies[i])
  end
  return { granted = grant, expiresAt = expiresAt, returned = returned, allowed = allowed, results = results, records = out, ttlMs = ttlMs }
end
