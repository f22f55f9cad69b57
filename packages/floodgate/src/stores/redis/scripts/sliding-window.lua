-- Sliding window (weighted two-window counter): the Lua twin of
-- src/core/algorithms/sliding-window.ts (read that file for the why).
-- State { windowStart, count, previousCount }.

local function slidingWindowRestoredAt(windowStart, count, previousCount, periodMs)
  if count > 0 then return windowStart + 2 * periodMs end
  if previousCount > 0 then return windowStart + periodMs end
  return windowStart
end

local function slidingWindowPassesAt(windowStart, count, previousCount, cost, p)
  local limit, periodMs = p.limit, p.periodMs
  local excess = count + cost - limit
  if excess <= 0 then
    return windowStart + ceil((periodMs * (previousCount + excess)) / previousCount)
  end
  return windowStart + periodMs + ceil((periodMs * excess) / count)
end

ALGORITHMS['sliding-window'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs = p.limit, p.periodMs
    local windowStart = floor(now / periodMs) * periodMs
    local count = 0
    local previousCount = 0
    if state ~= nil then
      windowStart = max(windowStart, state[1])
      if state[1] == windowStart then
        count = state[2]
        previousCount = state[3]
      elseif state[1] == windowStart - periodMs then
        previousCount = state[2]
      end
    end
    local elapsed = max(0, now - windowStart)
    local capacity = limit * periodMs
    local used = previousCount * (periodMs - elapsed) + count * periodMs

    local allowed = true
    if cost > 0 then
      allowed = used + cost * periodMs <= capacity
      if allowed then count = count + cost end
    elseif cost < 0 then
      count = count + cost
      if count < 0 then
        previousCount = max(0, previousCount + count)
        count = 0
      end
    else
      allowed = used <= capacity
    end

    local usedAfter = previousCount * (periodMs - elapsed) + count * periodMs
    local resetMs = max(0, slidingWindowRestoredAt(windowStart, count, previousCount, periodMs) - now)
    local retryAfterMs = 0
    if not allowed then
      if cost > limit then
        retryAfterMs = resetMs
      else
        retryAfterMs = slidingWindowPassesAt(windowStart, count, previousCount, cost, p) - now
      end
    end
    -- Written in place, not by a helper: in Redis a call costs more than the arithmetic of a step.
    local result = out or createStepResult()
    result.allowed = allowed
    result.remaining = max(0, floor((capacity - usedAfter) / periodMs))
    result.resetMs = resetMs
    result.retryAfterMs = retryAfterMs
    result.delayMs = 0
    local numbers = result.state
    local length = #numbers
    numbers[1], numbers[2], numbers[3] = windowStart, count, previousCount
    for i = 4, length do numbers[i] = nil end
    return result
  end,

  ttl = function(state, now, p)
    return max(1, slidingWindowRestoredAt(state[1], state[2], state[3], p.periodMs) - now)
  end,
}
