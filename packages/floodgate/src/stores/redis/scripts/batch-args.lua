-- Reads what a batched call (runner.lua, merge-runner.lua) starts with: its keys and its policies.

-- Every key of the batch, declared ones first: KEYS itself when every key is declared (a standalone
-- server's calls), else a copy with the others appended (KEYS is left as Redis made it). ARGV[at] is
-- how many keys were not declared; they follow it. Returns the keys and the next argument's index.
local function readBatchKeys(at)
  local extraKeys = tonumber(ARGV[at])
  local keys = KEYS
  if extraKeys > 0 then
    keys = {}
    for i = 1, #KEYS do keys[i] = KEYS[i] end
    for i = 1, extraKeys do keys[#keys + 1] = ARGV[at + i] end
  end
  return keys, at + 1 + extraKeys
end

-- The batch's distinct policies: a count at ARGV[at], then six arguments each, as policyArgs in
-- batch-codec.ts and merge-codec.ts write them. Returns the policies and the next argument's index.
local function readPolicies(at)
  local policies = {}
  local policyCount = tonumber(ARGV[at])
  local arg = at + 1
  for i = 1, policyCount do
    policies[i] = {
      algorithm = ARGV[arg],
      limit = tonumber(ARGV[arg + 1]),
      periodMs = tonumber(ARGV[arg + 2]),
      burst = tonumber(ARGV[arg + 3]),
      shaping = ARGV[arg + 4] == '1',
      blockMs = tonumber(ARGV[arg + 5]),
    }
    arg = arg + 6
  end
  return policies, arg
end
