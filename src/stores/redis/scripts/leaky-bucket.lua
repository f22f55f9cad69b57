-- Leaky bucket: the Lua twin of src/core/algorithms/leaky-bucket.ts (read that file for the why).
-- Policing state { level, lastMs, periodMs }: level in drops of 1/periodMs unit, `limit` leak per ms.
-- Shaping state { tailMs, tailTicks, limit }: the queue's tail is tailMs + tailTicks / limit.

-- The stored level in drops of 1/periodMs unit; drops counted under another period are converted (rounded up).
local function leaky_bucket_stored_level(state, periodMs)
  if state[3] ~= periodMs then return ceil((state[1] * periodMs) / state[3]) end
  return state[1]
end

-- How far the stored tail is ahead of now, in ticks of 1/limit ms (<= 0: the queue is empty).
-- Ticks counted under another limit (a reloaded policy) round up to the next whole millisecond.
local function leaky_bucket_queued(state, now, limit)
  if state[3] ~= limit and state[2] > 0 then return (state[1] + 1 - now) * limit end
  return (state[1] - now) * limit + state[2]
end

-- Policing: admit when the cost fits in the bucket, else reject.
local function leaky_bucket_police(state, now, cost, p)
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
  return {
    allowed = allowed,
    remaining = max(0, floor((capacity - level) / periodMs)),
    resetMs = resetMs,
    retryAfterMs = retryAfterMs,
    delayMs = 0,
    state = { level, lastMs, periodMs },
  }
end

-- Shaping: admit with a delay while the queue has room for the cost, else reject.
local function leaky_bucket_shape(state, now, cost, p)
  local limit, periodMs, burst = p.limit, p.periodMs, p.burst
  local capacity = burst * periodMs
  local queued = 0
  if state ~= nil then queued = max(0, leaky_bucket_queued(state, now, limit)) end

  local allowed = true
  local queuedAfter = queued
  local delayMs = 0
  if cost > 0 then
    allowed = queued + cost * periodMs <= capacity
    if allowed then
      queuedAfter = queued + cost * periodMs
      delayMs = ceil(queued / limit)
    end
  elseif cost < 0 then
    queuedAfter = max(0, queued + cost * periodMs)
  else
    allowed = queued <= capacity
  end

  local resetMs = ceil(queuedAfter / limit)
  local retryAfterMs = 0
  if not allowed then
    if cost > burst then
      retryAfterMs = resetMs
    else
      retryAfterMs = ceil((queued + cost * periodMs - capacity) / limit)
    end
  end
  local aheadMs = floor(queuedAfter / limit)
  return {
    allowed = allowed,
    remaining = max(0, floor((capacity - queuedAfter) / periodMs)),
    resetMs = resetMs,
    retryAfterMs = retryAfterMs,
    delayMs = delayMs,
    state = { now + aheadMs, queuedAfter - aheadMs * limit, limit },
  }
end

ALGORITHMS['leaky-bucket'] = {
  step = function(state, now, cost, p)
    if p.shaping then return leaky_bucket_shape(state, now, cost, p) end
    return leaky_bucket_police(state, now, cost, p)
  end,

  ttl = function(state, now, p)
    if p.shaping then return max(1, ceil(leaky_bucket_queued(state, now, p.limit) / p.limit)) end
    return max(1, state[2] + ceil(leaky_bucket_stored_level(state, p.periodMs) / p.limit) - now)
  end,
}
