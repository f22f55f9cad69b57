-- Leaky bucket: the Lua twin of src/core/algorithms/leaky-bucket.ts (read that file for the why).
-- Policing state { level, lastMs, periodMs }: level in drops of 1/periodMs unit, `limit` leak per ms.
-- Shaping state { tailMs, tailTicks, limit }: GCRA's (the queue's tail is its TAT), see gcra.lua.

-- The stored level in drops of 1/periodMs unit; drops counted under another period are converted (rounded up).
local function leaky_bucket_stored_level(state, periodMs)
  if state[3] ~= periodMs then return ceil((state[1] * periodMs) / state[3]) end
  return state[1]
end

-- Policing: admit when the cost fits in the bucket, else reject.
local function leaky_bucket_police(state, now, cost, p, out)
  local limit, periodMs, burst = p.limit, p.periodMs, p.burst
  local capacity = burst * periodMs
  local lastMs = now
  local level = 0
  if state ~= nil then
    lastMs = max(now, state[2])
    level = max(0, leaky_bucket_stored_level(state, periodMs) - (lastMs - state[2]) * limit)
  end

  local allowed = true
  if cost > 0 then
    allowed = level + cost * periodMs <= capacity
    if allowed then level = level + cost * periodMs end
  elseif cost < 0 then
    level = max(0, level + cost * periodMs)
  else
    allowed = level <= capacity
  end

  local resetMs = lastMs + ceil(level / limit) - now
  local retryAfterMs = 0
  if not allowed then
    if cost > burst then
      retryAfterMs = resetMs
    else
      retryAfterMs = lastMs + ceil((level + cost * periodMs - capacity) / limit) - now
    end
  end
  -- Written in place, not by a helper: in Redis a call costs more than the arithmetic of a step.
  local result = out or createStepResult()
  result.allowed = allowed
  result.remaining = max(0, floor((capacity - level) / periodMs))
  result.resetMs = resetMs
  result.retryAfterMs = retryAfterMs
  result.delayMs = 0
  local numbers = result.state
  local length = #numbers
  numbers[1], numbers[2], numbers[3] = level, lastMs, periodMs
  for i = 4, length do numbers[i] = nil end
  return result
end

-- Shaping: the queue's tail is GCRA's theoretical arrival time, so admission, results and state are
-- GCRA's; shaping adds the wait for this request's turn.
local function leaky_bucket_shape(state, now, cost, p, out)
  local result = ALGORITHMS['gcra'].step(state, now, cost, p, out)
  if result.allowed and cost > 0 then
    -- The turn comes where the tail stood before this request: the new tail less its own service.
    local limit, periodMs = p.limit, p.periodMs
    result.delayMs = ceil(((result.state[1] - now) * limit + result.state[2] - cost * periodMs) / limit)
  end
  return result
end

ALGORITHMS['leaky-bucket'] = {
  step = function(state, now, cost, p, out)
    if p.shaping then return leaky_bucket_shape(state, now, cost, p, out) end
    return leaky_bucket_police(state, now, cost, p, out)
  end,

  ttl = function(state, now, p)
    if p.shaping then return ALGORITHMS['gcra'].ttl(state, now, p) end
    return max(1, state[2] + ceil(leaky_bucket_stored_level(state, p.periodMs) / p.limit) - now)
  end,
}
