-- Merging usage into a state, ignoring the limit: the Lua twin of src/core/merge.ts (read that file
-- for the why). Appended after prelude.lua and the algorithm files, whose steps and helpers it uses
-- (leaky_bucket_stored_level). MERGES[name](state, now, units, p, out) -> new state table, and
-- optionally its ttl (as ALGORITHMS[name].ttl gives it; else the caller asks that); `out`
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

-- GCRA's step with its burst lifted, reduced to the state it leaves (gcra.lua's arithmetic, with
-- gcra_lag written out), and the ttl gcra.lua's ttl gives that state: a flush merges every key it
-- carries, where the step's answer (remaining, reset, retry) and the calls cost more than the state.
-- merge-equivalence.test.ts holds it to merge.ts's step-based twin.
MERGES['gcra'] = function(state, now, units, p, out)
  local limit, periodMs = p.limit, p.periodMs
  local lag = 0
  if state ~= nil then
    if state[3] ~= limit and state[2] > 0 then lag = (state[1] + 1 - now) * limit
    else lag = (state[1] - now) * limit + state[2] end
    if lag < 0 then lag = 0 end
  end
  local lagAfter = lag + units * periodMs
  if lagAfter < 0 then lagAfter = 0 end
  local aheadMs = floor(lagAfter / limit)
  local numbers = out and out.state or {}
  local tatMs, tatTicks = now + aheadMs, lagAfter - aheadMs * limit
  numbers[1], numbers[2], numbers[3] = tatMs, tatTicks, limit
  for i = 4, #numbers do numbers[i] = nil end
  -- gcra.lua's ttl of this state (its third number is `limit`), term for term.
  local ttl = ceil(((tatMs - now) * limit + tatTicks) / limit)
  if ttl < 1 then ttl = 1 end
  return numbers, ttl
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
