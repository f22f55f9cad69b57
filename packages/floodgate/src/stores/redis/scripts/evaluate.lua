-- Decides several policies for one key all-or-nothing, with block periods: the Lua twin of
-- src/core/evaluate.ts (evaluateKeyInto and its body, decide), same names, same order; read that
-- file for the why. A policy is { algorithm, limit, periodMs, burst, shaping, blockMs }, a record
-- { blockedUntil, state }.

-- Where evaluateKeyInto's steps write, one per policy position. It runs to the end without calling
-- anything that could re-enter it (steps are pure), so one set serves every call.
local stepBuffers = {}
-- Which policies were stepped (false: blocked) in the call in progress, for the same reason.
local steps = {}

-- An empty evaluation for evaluateKeyInto to fill; a script keeps one and reuses it for every request.
local function createEvaluation()
  return { allowed = true, results = {}, records = {}, ttlMs = {} }
end

local function setResult(result, allowed, remaining, resetMs, retryAfterMs, delayMs, blocked)
  result.allowed = allowed
  result.remaining = remaining
  result.resetMs = resetMs
  result.retryAfterMs = retryAfterMs
  result.delayMs = delayMs
  result.blocked = blocked
end

local function toResult(step, result)
  setResult(result, step.allowed, step.remaining, step.resetMs, step.retryAfterMs, step.delayMs, false)
end

-- One result and one record table per policy, created the first time an evaluation needs them.
local function sizeEvaluation(out, count)
  local results, records, ttlMs = out.results, out.records, out.ttlMs
  if #results == count then return end
  for i = #results, count + 1, -1 do
    results[i] = nil
    records[i] = nil
    ttlMs[i] = nil
  end
  for i = #results + 1, count do
    results[i] = { allowed = true, remaining = 0, resetMs = 0, retryAfterMs = 0, delayMs = 0, blocked = false }
    records[i] = { blockedUntil = 0, state = nil }
    ttlMs[i] = 1
  end
end

-- Sets `out` (allowed, results, records, ttlMs) for `policies` in place, the algorithms writing into
-- reused step buffers: results are valid until the next call with the same `out`, a new record
-- state (a step buffer's array) only until the next call at all. Input states are only read.
local function evaluateKeyInto(records, now, cost, policies, out)
  local results = out.results
  local nextRecords = out.records
  local ttlMs = out.ttlMs
  sizeEvaluation(out, #policies)
  for i = #stepBuffers + 1, #policies do stepBuffers[i] = createStepResult() end
  local allowed = true
  for i = 1, #policies do
    local policy = policies[i]
    local record = records[i]
    local blockedUntil = (record and record.blockedUntil > now) and record.blockedUntil or 0
    local state = record and record.state
    -- A caller feeding a previous answer's records back in: the step must not write what it reads.
    if state == stepBuffers[i].state then stepBuffers[i].state = {} end
    local step = ALGORITHMS[policy.algorithm].step(state, now, cost, policy, stepBuffers[i])
    if cost >= 0 and blockedUntil > 0 then
      -- Blocked (a peek too): the wait covers the block and the algorithm's own wait after it.
      local wait = blockedUntil - now
      steps[i] = false
      setResult(results[i], false, 0, max(wait, step.resetMs), max(wait, step.allowed and 0 or step.retryAfterMs), 0, true)
      allowed = false
    else
      steps[i] = step
      toResult(step, results[i])
      if not step.allowed then allowed = false end
    end
  end

  for i = 1, #policies do
    local policy = policies[i]
    local algorithm = ALGORITHMS[policy.algorithm]
    local record = records[i]
    local blockedUntil = (record and record.blockedUntil > now) and record.blockedUntil or 0
    local state = record and record.state
    local step = steps[i]
    steps[i] = false
    if allowed then
      state = step.state
    elseif step then
      if not step.allowed and cost > 0 and policy.blockMs > 0 then
        blockedUntil = now + policy.blockMs
        local result = results[i]
        result.retryAfterMs = max(result.retryAfterMs, policy.blockMs)
        result.resetMs = max(result.resetMs, policy.blockMs)
      elseif step.allowed and cost > 0 then
        -- The step's own state is not kept when denied, so its buffer takes the peek.
        toResult(algorithm.step(state, now, 0, policy, step), results[i])
      end
    end
    local nextRecord = nextRecords[i]
    nextRecord.blockedUntil = blockedUntil
    nextRecord.state = state
    local ttl = state == nil and 1 or algorithm.ttl(state, now, policy)
    if blockedUntil > 0 then ttl = max(ttl, blockedUntil - now) end
    ttlMs[i] = ttl
  end
  out.allowed = allowed
  return out
end
