---------------------------------------------------------------- quota
-- quota (8): a fixed window whose boundaries are calendar periods (local
-- midnights of the limit's zone), which Lua cannot compute: the caller
-- computes them in Go at its own clock and passes, per window, p = { L,
-- b1, capacity, b2, b3 }: the current period [b1, b2) and the next one
-- [b2, b3). The script picks by its now (Redis TIME with the store clock,
-- which may be a little off the caller's): before b2 the current period
-- (a now a little before b1 counts in it too, as the period the caller is
-- in), then the next one. s = { period start, period end, count }.
DEF[8] = function()
  -- the period containing now among those passed.
  local function period(p)
    if now < p[4] then return p[2], p[4] end
    if now < p[5] then return p[4], p[5] end
    -- Further ahead than the caller's next period: the length of the
    -- next one again (a clock this far off is refused elsewhere).
    return p[5], p[5] + (p[5] - p[4])
  end
  -- the period and count in effect at now: from the period's end on, the
  -- period containing now, counted from 0; before it, the state itself.
  local function at(s, p)
    if now >= s[2] then
      local a, b = period(p)
      return a, b, 0
    end
    return s[1], s[2], s[3]
  end
  return {
    init = function(p)
      local a, b = period(p)
      return { a, b, 0 }
    end,
    allow = function(s, p, cost)
      local _, e, count = at(s, p)
      if cost <= p[1] - count then return true, 0 end -- exact (fixed_window.lua)
      return false, e - now
    end,
    take = function(s, p, cost)
      local a, b, count = at(s, p)
      s[1], s[2], s[3] = a, b, count + cost
    end,
    remaining = function(s, p)
      local _, _, count = at(s, p)
      return clamp(p[1] - count, 0, p[3])
    end,
    expiry = function(s) return s[2] end,
    nfields = function() return 3 end,
    giveback = function(s, o, a, p, c)
      if s[1] == a[1] then s[3] = s[3] - c end
      if s[3] < 0 then s[3] = 0 end
    end,
  }
end
