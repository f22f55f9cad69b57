-- Fixed window: the Lua twin of src/core/algorithms/fixed-window.ts (read that file for the why).
-- State { windowStart, count }.

ALGORITHMS['fixed-window'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs = p.limit, p.periodMs
    local windowStart = floor(now / periodMs) * periodMs
    local count = 0
    if state ~= nil then
      windowStart = max(windowStart, state[1])
      if state[1] == windowStart then count = state[2] end
    end
    local resetMs = windowStart + periodMs - now

    local allowed = true
    if cost > 0 then
      allowed = count + cost <= limit
      if allowed then count = count + cost end
    elseif cost < 0 then
      count = max(0, count + cost)
    else
      allowed = count <= limit
    end

    -- Written in place, not by a helper: in Redis a call costs more than the arithmetic of a step.
    local result = out or createStepResult()
    result.allowed = allowed
    result.remaining = max(0, floor(limit - count))
    result.resetMs = resetMs
    result.retryAfterMs = allowed and 0 or resetMs
    result.delayMs = 0
    local numbers = result.state
    local length = #numbers
    numbers[1], numbers[2] = windowStart, count
    for i = 3, length do numbers[i] = nil end
    return result
  end,

  ttl = function(state, now, p)
    if state[2] == 0 then return 1 end
    return max(1, state[1] + p.periodMs - now)
  end,
}
