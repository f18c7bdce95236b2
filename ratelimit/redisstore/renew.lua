-- Tollgate: renew the leases of the concurrency slots one holder holds.
-- KEYS[h]  concurrency state (decide.lua's sorted set) of slot h
-- ARGV[1]  lease in ms; ARGV[2] the key's TTL beyond a lease, in ms
-- ARGV[2+h] the member of slot h
-- A slot that is gone (its lease ended before this renewal, or the key was
-- reset) is not brought back: its units may have been handed to others.
-- Returns the number of slots not found.
local t = redis.call('TIME')
local lease, margin = tonumber(ARGV[1]), tonumber(ARGV[2])
local score = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]) + lease * 1000)
local lost = 0
for h = 1, #KEYS do
  local k, m = KEYS[h], ARGV[2 + h]
  if redis.call('ZADD', k, 'XX', 'CH', score, m) == 1 or redis.call('ZSCORE', k, m) then
    redis.call('PEXPIRE', k, lease + margin)
  else
    lost = lost + 1
  end
end
return lost
