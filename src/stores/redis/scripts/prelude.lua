-- Shared by every algorithm script: the registry the runner dispatches on, and the helpers both
-- executors use. Algorithm files register themselves as ALGORITHMS['<name>'] = { step = ..., ttl = ... },
-- twins of src/core/algorithms/<name>.ts with the same names and the same arithmetic.
--
-- step(state, now, cost, p) -> { allowed = bool, remaining = n, resetMs = n, retryAfterMs = n,
--                                delayMs = n, state = { numbers... } }
--   state: array of numbers, or nil when the key has none; p: { limit, periodMs, burst, shaping }.
-- ttl(state, now, p) -> whole milliseconds >= 1 after which the state equals no state.
--
-- Never use Lua's % (it is a - floor(a/b)*b, JavaScript's is fmod): write the floor form in both.

local ALGORITHMS = {}
local floor, ceil, max, min = math.floor, math.ceil, math.max, math.min
