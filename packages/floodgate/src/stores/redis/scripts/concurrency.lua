-- Concurrency: the Lua twin of src/core/algorithms/concurrency.ts (read that file for the why).
-- State { expiry1, count1, expiry2, count2, ... }: the leases in flight, earliest expiry first.

-- The lease pairs still in flight at now (expiry after now).
local function concurrency_live(state, now)
  local leases = {}
  if state == nil then return leases end
  for i = 1, #state, 2 do
    if state[i] > now then
      leases[#leases + 1] = state[i]
      leases[#leases + 1] = state[i + 1]
    end
  end
  return leases
end

-- How many leases the pairs hold.
local function concurrency_count(leases)
  local count = 0
  for i = 2, #leases, 2 do count = count + leases[i] end
  return count
end

-- The expiry of the rank-th earliest lease (1-based).
local function concurrency_expiry_of(leases, rank)
  local seen = 0
  for i = 1, #leases, 2 do
    seen = seen + leases[i + 1]
    if seen >= rank then return leases[i] end
  end
  return leases[#leases - 1]
end

-- The pairs with cost more leases expiring at expiry, kept in order.
local function concurrency_acquired(leases, cost, expiry)
  local out = {}
  local i = 1
  while i <= #leases and leases[i] < expiry do
    out[#out + 1] = leases[i]
    out[#out + 1] = leases[i + 1]
    i = i + 2
  end
  if i <= #leases and leases[i] == expiry then
    out[#out + 1] = expiry
    out[#out + 1] = leases[i + 1] + cost
    i = i + 2
  else
    out[#out + 1] = expiry
    out[#out + 1] = cost
  end
  while i <= #leases do
    out[#out + 1] = leases[i]
    out[#out + 1] = leases[i + 1]
    i = i + 2
  end
  return out
end

-- The pairs without the released earliest-expiring leases (all of them if fewer).
local function concurrency_released(leases, released)
  local out = {}
  local left = released
  for i = 1, #leases, 2 do
    if left >= leases[i + 1] then
      left = left - leases[i + 1]
    else
      out[#out + 1] = leases[i]
      out[#out + 1] = leases[i + 1] - left
      left = 0
    end
  end
  return out
end

ALGORITHMS['concurrency'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs = p.limit, p.periodMs
    local leases = concurrency_live(state, now)
    local inFlight = concurrency_count(leases)

    local allowed = true
    if cost > 0 then
      allowed = inFlight + cost <= limit
      if allowed then leases = concurrency_acquired(leases, cost, now + periodMs) end
    elseif cost < 0 then
      leases = concurrency_released(leases, -cost)
    else
      allowed = inFlight <= limit
    end

    local resetMs = 0
    if #leases > 0 then resetMs = leases[#leases - 1] - now end
    local retryAfterMs = 0
    if not allowed then
      if cost > limit then
        retryAfterMs = resetMs
      else
        retryAfterMs = concurrency_expiry_of(leases, inFlight + cost - limit) - now
      end
    end
    local result = writeStep(out, allowed, max(0, limit - concurrency_count(leases)), resetMs, retryAfterMs, 0)
    copyState(result.state, leases)
    return result
  end,

  ttl = function(state, now, p)
    if #state > 0 then return max(1, state[#state - 1] - now) end
    return 1
  end,
}
