-- Sliding log: the Lua twin of src/core/algorithms/sliding-log.ts (read that file for the why).
-- State { t1, c1, t2, c2, ... }: ascending timestamps with costs, pruned to t > now - periodMs.

local function slidingLogPassesAt(log, used, cost, p)
  local left = used
  local i = 1
  while left + cost > p.limit do
    left = left - log[i + 1]
    i = i + 2
  end
  return log[i - 2] + p.periodMs
end

ALGORITHMS['sliding-log'] = {
  step = function(state, now, cost, p, out)
    local limit, periodMs = p.limit, p.periodMs
    local at = now
    local log = {}
    local used = 0
    if state ~= nil then
      if #state > 0 then at = max(now, state[#state - 1]) end
      for i = 1, #state, 2 do
        if state[i] > at - periodMs then
          log[#log + 1] = state[i]
          log[#log + 1] = state[i + 1]
          used = used + state[i + 1]
        end
      end
    end

    local allowed = true
    if cost > 0 then
      allowed = used + cost <= limit
      if allowed then
        if #log > 0 and log[#log - 1] == at then
          log[#log] = log[#log] + cost
        else
          log[#log + 1] = at
          log[#log + 1] = cost
        end
        used = used + cost
      end
    elseif cost < 0 then
      local refund = -cost
      while refund > 0 and #log > 0 do
        local newest = log[#log]
        if newest <= refund then
          refund = refund - newest
          log[#log] = nil
          log[#log] = nil
        else
          log[#log] = newest - refund
          refund = 0
        end
      end
      used = max(0, used + cost)
    else
      allowed = used <= limit
    end

    local resetMs = 0
    if #log > 0 then resetMs = log[#log - 1] + periodMs - now end
    local retryAfterMs = 0
    if not allowed then
      if cost > limit then
        retryAfterMs = resetMs
      else
        retryAfterMs = slidingLogPassesAt(log, used, cost, p) - now
      end
    end
    local result = writeStep(out, allowed, max(0, floor(limit - used)), resetMs, retryAfterMs, 0)
    copyState(result.state, log)
    return result
  end,

  ttl = function(state, now, p)
    if #state == 0 then return 1 end
    return max(1, state[#state - 1] + p.periodMs - now)
  end,
}
