-- Merging usage into a state, ignoring the limit: the Lua twin of src/core/merge.ts (read that file
-- for the why). Appended after prelude.lua and the algorithm files, whose helpers it uses
-- (gcra_lag, leaky_bucket_stored_level). MERGES[name](state, now, units, p) -> new state table.

local MERGES = {}

MERGES['fixed-window'] = function(state, now, units, p)
  local periodMs = p.periodMs
  local windowStart = floor(now / periodMs) * periodMs
  local count = 0
  if state ~= nil then
    windowStart = max(windowStart, state[1])
    if state[1] == windowStart then count = state[2] end
  end
  return { windowStart, max(0, count + units) }
end

MERGES['sliding-window'] = function(state, now, units, p)
  local periodMs = p.periodMs
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
  count = count + units
  if count < 0 then
    previousCount = max(0, previousCount + count)
    count = 0
  end
  return { windowStart, count, previousCount }
end

MERGES['token-bucket'] = function(state, now, units, p)
  local limit, periodMs = p.limit, p.periodMs
  local capacity = p.burst * periodMs
  local at = now
  local level = capacity
  if state ~= nil then
    at = max(now, state[2])
    level = min(capacity, state[1] + (at - state[2]) * limit)
  end
  if units > 0 then
    level = level - units * periodMs
  else
    level = min(capacity, level - units * periodMs)
  end
  return { level, at }
end

MERGES['gcra'] = function(state, now, units, p)
  local limit, periodMs = p.limit, p.periodMs
  local lag = 0
  if state ~= nil then lag = max(0, gcra_lag(state, now, limit)) end
  local lagAfter = max(0, lag + units * periodMs)
  local aheadMs = floor(lagAfter / limit)
  return { now + aheadMs, lagAfter - aheadMs * limit, limit }
end

MERGES['leaky-bucket'] = function(state, now, units, p)
  local limit, periodMs = p.limit, p.periodMs
  local lastMs = now
  local level = 0
  if state ~= nil then
    lastMs = max(now, state[2])
    level = max(0, leaky_bucket_stored_level(state, periodMs) - (lastMs - state[2]) * limit)
  end
  return { max(0, level + units * periodMs), lastMs, periodMs }
end
