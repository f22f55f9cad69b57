-- Token bucket with lazy refill: the Lua twin of src/core/algorithms/token-bucket.ts (read that
-- file for the why). State { level, lastMs }, level in token-milliseconds (tokens * periodMs).

ALGORITHMS['token-bucket'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs, burst = p.limit, p.periodMs, p.burst
    local capacity = burst * periodMs
    local at = now
    local level = capacity
    if state ~= nil then
      at = max(now, state[2])
      level = min(capacity, state[1] + (at - state[2]) * limit)
    end

    local allowed = true
    if cost > 0 then
      allowed = level >= cost * periodMs
      if allowed then level = level - cost * periodMs end
    elseif cost < 0 then
      level = min(capacity, level - cost * periodMs)
    end

    local resetMs = at + ceil((capacity - level) / limit) - now
    local retryAfterMs = 0
    if not allowed then
      if cost > burst then
        retryAfterMs = resetMs
      else
        retryAfterMs = at + ceil((cost * periodMs - level) / limit) - now
      end
    end
    -- Written in place, not by a helper: in Redis a call costs more than the arithmetic of a step.
    local result = out or createStepResult()
    result.allowed = allowed
    result.remaining = floor(level / periodMs)
    result.resetMs = resetMs
    result.retryAfterMs = retryAfterMs
    result.delayMs = 0
    local numbers = result.state
    local length = #numbers
    numbers[1], numbers[2] = level, at
    for i = 3, length do numbers[i] = nil end
    return result
  end,

  ttl = function(state, now, p)
    local capacity = p.burst * p.periodMs
    return max(1, state[2] + ceil((capacity - state[1]) / p.limit) - now)
  end,
}
