-- Tollgate: give back concurrency units.
-- KEYS[h]  concurrency state of hit h (the in-flight count, one packed
--          little-endian double, as decide.lua stores it)
-- ARGV[h]  units to give back (never below zero)
-- A key left at zero is deleted; otherwise its lease TTL is kept.
for h = 1, #KEYS do
  local raw = redis.call('GET', KEYS[h])
  if raw then
    if #raw ~= 8 then error('tollgate: corrupt counter state') end
    local v = struct.unpack('<d', raw)
    if v ~= v then error('tollgate: corrupt counter state') end
    v = v - tonumber(ARGV[h])
    if not (v > 0) then
      redis.call('DEL', KEYS[h])
    else
      redis.call('SET', KEYS[h], struct.pack('<d', v), 'KEEPTTL')
    end
  end
end
return #KEYS
