-- GCRA: the Lua twin of src/core/algorithms/gcra.ts (read that file for the why).
-- State { tatMs, tatTicks, limit }: the TAT is tatMs + tatTicks / limit; arithmetic in ticks of 1/limit ms.

-- The stored TAT as ms, ticks of 1/limit ms; ticks counted under another limit round up to a whole ms.
local function gcra_stored_tat(state, limit)
  if state[3] ~= limit and state[2] > 0 then return state[1] + 1, 0 end
  return state[1], state[2]
end

ALGORITHMS['gcra'] = {
  step = function(state, now, cost, p)
    local limit, periodMs, burst = p.limit, p.periodMs, p.burst
    local tolerance = burst * periodMs
    local tatMs = now
    local tatTicks = 0
    local lag = 0
    if state ~= nil then
      local storedMs, storedTicks = gcra_stored_tat(state, limit)
      local storedLag = (storedMs - now) * limit + storedTicks
      if storedLag > 0 then
        tatMs = storedMs
        tatTicks = storedTicks
        lag = storedLag
      end
    end

    local allowed = true
    local lagAfter = lag
    if cost > 0 then
      allowed = lag + cost * periodMs <= tolerance
      if allowed then lagAfter = lag + cost * periodMs end
    elseif cost < 0 then
      lagAfter = max(0, lag + cost * periodMs)
    else
      allowed = lag <= tolerance
    end

    if cost ~= 0 and allowed then
      if lagAfter == 0 then
        tatMs = now
        tatTicks = 0
      else
        tatTicks = tatTicks + cost * periodMs
        local carry = floor(tatTicks / limit)
        tatMs = tatMs + carry
        tatTicks = tatTicks - carry * limit
      end
    end

    local resetMs = ceil(lagAfter / limit)
    local retryAfterMs = 0
    if not allowed then
      if cost > burst then
        retryAfterMs = resetMs
      else
        retryAfterMs = ceil((lag + cost * periodMs - tolerance) / limit)
      end
    end
    return {
      allowed = allowed,
      remaining = max(0, floor((tolerance - lagAfter) / periodMs)),
      resetMs = resetMs,
      retryAfterMs = retryAfterMs,
      delayMs = 0,
      state = { tatMs, tatTicks, limit },
    }
  end,

  ttl = function(state, now, p)
    local storedMs, storedTicks = gcra_stored_tat(state, p.limit)
    return max(1, ceil(((storedMs - now) * p.limit + storedTicks) / p.limit))
  end,
}
