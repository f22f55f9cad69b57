-- GCRA: the Lua twin of src/core/algorithms/gcra.ts (read that file for the why).
-- State { tatMs, tatTicks, limit }: the TAT is tatMs + tatTicks / limit; arithmetic in ticks of 1/limit ms.

-- How far the stored TAT is ahead of now, in ticks of 1/limit ms (<= 0: already past). Ticks
-- counted under another limit (a reloaded policy) round up to the next whole millisecond.
local function gcra_lag(state, now, limit)
  if state[3] ~= limit and state[2] > 0 then return (state[1] + 1 - now) * limit end
  return (state[1] - now) * limit + state[2]
end

ALGORITHMS['gcra'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs, burst = p.limit, p.periodMs, p.burst
    local tolerance = burst * periodMs
    local lag = 0
    if state ~= nil then lag = max(0, gcra_lag(state, now, limit)) end

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

    local resetMs = ceil(lagAfter / limit)
    local retryAfterMs = 0
    if not allowed then
      if cost > burst then
        retryAfterMs = resetMs
      else
        retryAfterMs = ceil((lag + cost * periodMs - tolerance) / limit)
      end
    end
    local aheadMs = floor(lagAfter / limit)
    -- Written in place, not by a helper: in Redis a call costs more than the arithmetic of a step.
    local result = out or createStepResult()
    result.allowed = allowed
    result.remaining = max(0, floor((tolerance - lagAfter) / periodMs))
    result.resetMs = resetMs
    result.retryAfterMs = retryAfterMs
    result.delayMs = 0
    local numbers = result.state
    local length = #numbers
    numbers[1], numbers[2], numbers[3] = now + aheadMs, lagAfter - aheadMs * limit, limit
    for i = 4, length do numbers[i] = nil end
    return result
  end,

  ttl = function(state, now, p)
    return max(1, ceil(gcra_lag(state, now, p.limit) / p.limit))
  end,
}
