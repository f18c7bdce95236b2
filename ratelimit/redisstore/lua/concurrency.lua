---------------------------------------------------------------- concurrency leases
-- A concurrency key is a sorted set: one member per held slot, scored with
-- the instant (ticks of the Redis server's clock, always: leases are about
-- real time, whatever clock decides) at which its lease ends, and the
-- member '#' scored with minus the units in flight (<= 0, so that no range
-- of lease ends ever includes it). A member is a packed string: the slot's
-- cost as a '<d' double, then its holder's id; the holder renews it
-- (renew.lua) and gives it back (release.lua). A slot whose lease has
-- ended is dropped by the next call that touches the key, so the slots of
-- a crashed holder come back one lease after its last renewal.
-- s = { units in flight } (one window).
DEF[7] = function()
  local function ltime()
    if not leasenow then
      if usetime == 1 then
        leasenow = now
      else
        leasenow = redistime()
      end
    end
    return leasenow
  end

  -- integers travel to Redis as exact decimal text (a Lua number would be
  -- formatted with 14 digits).
  local function itoa(x) return string.format('%.0f', x) end

  -- cwrite stores the units in flight of k (deleting the key at zero).
  local function cwrite(k, total)
    if total > 0 then
      redis.call('ZADD', k, itoa(-total), '#')
    else
      redis.call('DEL', k)
    end
  end

  -- cread returns the units in flight of k at ltime(): the stored total less
  -- the slots whose lease has ended; with write set, those slots are dropped.
  local function cread(k, write)
    local sc = redis.call('ZSCORE', k, '#')
    if not sc then return 0 end
    local total = -tonumber(sc)
    local cut = itoa(ltime())
    local gone = redis.call('ZRANGEBYSCORE', k, '(0', cut)
    if #gone > 0 then
      for i = 1, #gone do total = total - sunpack('<d', gone[i]) end
      if total < 0 then total = 0 end
      if write then
        redis.call('ZREMRANGEBYSCORE', k, '(0', cut)
        cwrite(k, total)
      end
    end
    return total
  end

  return {
    lease = true,
    read = cread,
    write = cwrite,
    -- hold adds member m to k, its lease ending one lease from now.
    hold = function(k, m)
      redis.call('ZADD', k, itoa(ltime() + lease * 1000), m)
    end,
    -- release gives back member m of k, if it is still there.
    release = function(k, m)
      if redis.call('ZREM', k, m) == 1 then
        cwrite(k, cread(k, true) - sunpack('<d', m))
      end
    end,
    init = function() return { 0 } end,
    allow = function(s, p, cost) return s[1] + cost <= p[3], 0 end,
    take = function(s, p, cost) s[1] = s[1] + cost end,
    remaining = function(s, p) return clamp(p[3] - s[1], 0, p[3]) end,
    expiry = function(s)
      if s[1] > 0 then return nil end
      return false
    end,
    nfields = function() return 1 end,
    giveback = function(s, o, a, p, c)
      s[1] = s[1] - c
      if s[1] < 0 then s[1] = 0 end
    end,
  }
end
