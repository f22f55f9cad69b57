-- Shared by every algorithm script: the registry the runner dispatches on, and the helpers both
-- executors use. Algorithm files register themselves as ALGORITHMS['<name>'] = { step = ..., ttl = ... };
-- they are generated from src/core/algorithms/<name>.ts by scripts/gen-algorithms.mjs.
--
-- step(state, now, cost, p, out) -> { allowed = bool, remaining = n, resetMs = n, retryAfterMs = n,
--                                     delayMs = n, state = { numbers... } }
--   state: array of numbers, or nil when the key has none (only read); p: { limit, periodMs, burst,
--   shaping }; out: a result to overwrite (its state array rewritten in place, never `state` itself),
--   or nil for a new one.
-- ttl(state, now, p) -> whole milliseconds >= 1 after which the state equals no state.
--
-- Never use Lua's % (it is a - floor(a/b)*b, JavaScript's is fmod): write the floor form in both.

local ALGORITHMS = {}
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min

-- Twins of createStepResult and copyState in src/core/algorithms/types.ts: a table costs more than
-- the arithmetic of a step, so the runner reuses one result per policy. (types.ts's writeStep and
-- writeState are inlined by the generator as assignments: a call is dear here.)
-- Arrays are kept without holes, so `#` is their length.
local function createStepResult()
  return { allowed = true, remaining = 0, resetMs = 0, retryAfterMs = 0, delayMs = 0, state = {} }
end

-- Makes `state` a copy of `numbers`, in place.
local function copyState(state, numbers)
  local length = #state
  for i = 1, #numbers do state[i] = numbers[i] end
  for i = #numbers + 1, length do state[i] = nil end
end
