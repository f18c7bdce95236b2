-- Tollgate: give back concurrency slots by their holder's member.
-- KEYS[h]  concurrency state of hit h: the sorted set decide.lua keeps
--          (members: holder slots scored with their lease end in ticks of
--          the server's clock; '#' scored with minus the units in flight)
-- ARGV[h]  the member of the slot to give back: its cost as a '<d' double,
--          then the holder's slot id
-- Idempotent: a member already gone (given back before, dropped when its
-- lease ended, or reset) gives back nothing, so a release whose reply was
-- lost can be sent again. Slots whose lease has ended are dropped on the
-- way (a key left with nothing in flight needs no sweep: it is deleted);
-- otherwise the key's TTL is kept. Returns the number of slots given back.
local sunpack = struct.unpack
local cut -- TIME in ticks as text, read only when a sweep needs it
local given = 0
for h = 1, #KEYS do
  local k, m = KEYS[h], ARGV[h]
  local removed = redis.call('ZREM', k, m)
  local sc = redis.call('ZSCORE', k, '#')
  if sc then
    local total = -tonumber(sc)
    if removed == 1 then
      total = total - sunpack('<d', m)
      given = given + 1
    end
    if total > 0 then
      if not cut then
        local t = redis.call('TIME')
        cut = string.format('%.0f', tonumber(t[1]) * 1000000 + tonumber(t[2]))
      end
      local gone = redis.call('ZRANGEBYSCORE', k, '(0', cut)
      if #gone > 0 then
        for i = 1, #gone do total = total - sunpack('<d', gone[i]) end
        redis.call('ZREMRANGEBYSCORE', k, '(0', cut)
      end
    end
    if total > 0 then
      redis.call('ZADD', k, string.format('%.0f', -total), '#')
    else
      redis.call('DEL', k)
    end
  end
end
return given
