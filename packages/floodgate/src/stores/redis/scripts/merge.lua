-- Merging usage into a state, ignoring the limit: the Lua twin of src/core/merge.ts (read that file
-- for the why). Appended after prelude.lua and the algorithm files, whose steps and helpers it uses
-- (leaky_bucket_stored_level). MERGES[name](state, now, units, p, out) -> new state table; `out`
-- (optional, a createStepResult) is the result a step-based merge writes into: its state is then
-- rewritten by the next merge given the same `out`, so a caller that passes one uses the state first.

local MERGES = {}

-- A window counter's merge, or GCRA's, is its own step with the bound a forced charge may pass
-- lifted (limit for the windows, burst for GCRA); the buckets keep merges of their own (see merge.ts).
local function step_unbounded(name, lifted)
  local step = ALGORITHMS[name].step
  local unbounded = {}
  return function(state, now, units, p, out)
    local lifting = unbounded[p]
    if lifting == nil then
      lifting = {}
      for field, value in pairs(p) do lifting[field] = value end
      lifting[lifted] = math.huge
      unbounded[p] = lifting
    end
    -- Without `out` a step makes a result and a state table per merge, which costs more than its arithmetic.
    return step(state, now, units, lifting, out).state
  end
end

MERGES['fixed-window'] = step_unbounded('fixed-window', 'limit')
MERGES['sliding-window'] = step_unbounded('sliding-window', 'limit')

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

MERGES['gcra'] = step_unbounded('gcra', 'burst')

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
