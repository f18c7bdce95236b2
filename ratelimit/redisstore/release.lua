-- Tollgate: give back concurrency units.
-- KEYS[h]  concurrency state of hit h (a decimal in-flight count)
-- ARGV[h]  units to give back (never below zero)
-- A key left at zero is deleted; otherwise its lease TTL is kept.
for h = 1, #KEYS do
  local raw = redis.call('GET', KEYS[h])
  if raw then
    local v = tonumber(raw)
    if v == nil then error('tollgate: corrupt counter state') end
    v = math.max(v - tonumber(ARGV[h]), 0)
    if v == 0 then
      redis.call('DEL', KEYS[h])
    else
      redis.call('SET', KEYS[h], string.format('%.17g', v), 'KEEPTTL')
    end
  end
end
return #KEYS
