-- The override table: one hash, KEYS[1], with one field per override
-- (limit NUL subject) holding "<expires µs> <json>", and the field "#v",
-- the table's version: Redis TIME in µs at the last change, or one more
-- than the previous version if that is not later, so every change makes a
-- version never seen before, across restarts and flushes too.
--
-- ARGV[1] = "put": ARGV[2] now (µs), ARGV[3] field, ARGV[4] value,
-- ARGV[5] the most overrides the table may hold. Drops every override
-- expired at now, then adds or replaces the field unless the table is
-- full. Returns 1, or 0 when full.
-- ARGV[1] = "del": ARGV[2] field. Returns 1 when it was there, else 0.
local h = KEYS[1]

local function bump()
  local t = redis.call('TIME')
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local v = tonumber(redis.call('HGET', h, '#v') or '0') or 0
  if us <= v then us = v + 1 end
  redis.call('HSET', h, '#v', string.format('%d', us))
end

if ARGV[1] == 'del' then
  if redis.call('HDEL', h, ARGV[2]) == 1 then
    bump()
    return 1
  end
  return 0
end

local now = tonumber(ARGV[2])
local all = redis.call('HGETALL', h)
local others, changed = 0, false
for i = 1, #all, 2 do
  local f = all[i]
  if f ~= '#v' then
    local exp = tonumber(string.match(all[i + 1], '^(%d+) '))
    if exp == nil or exp <= now then
      redis.call('HDEL', h, f)
      changed = true
    elseif f ~= ARGV[3] then
      others = others + 1
    end
  end
end
if others >= tonumber(ARGV[5]) then
  if changed then bump() end
  return 0
end
redis.call('HSET', h, ARGV[3], ARGV[4])
bump()
return 1
