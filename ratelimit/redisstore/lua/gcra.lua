---------------------------------------------------------------- gcra
-- s = { tat }.
DEF[6] = function()
  -- max(tat - now, 0) + c*T <= tau: see GCRAState.allowedAt in Go for why
  -- it is not written as max(tat, now) + c*T - now.
  local function gallowed(s, t, c, et, tau)
    local d = s[1] - t
    if d < 0 then d = 0 end
    return d + c * et <= tau
  end
  return {
    init = function() return { now } end,
    allow = function(s, p, cost)
      local et = p[2] / p[1]
      local tau = p[3] * et
      if gallowed(s, now, cost, et, tau) then return true, 0 end
      local tat = s[1]
      if tat < now then tat = now end
      tat = tat + cost * et
      local d = ceilticks(tat - tau - now)
      if d < 1 then d = 1 end
      local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
      while not gallowed(s, now + d, cost, et, tau) and guard < 100000 do d, guard = d + 1, guard + 1 end
      while d > 1 and gallowed(s, now + d - 1, cost, et, tau) do d = d - 1 end
      return false, d
    end,
    take = function(s, p, cost)
      local tat = s[1]
      if tat < now then tat = now end
      s[1] = tat + cost * (p[2] / p[1])
    end,
    remaining = function(s, p)
      local et = p[2] / p[1]
      local tau = p[3] * et
      local tat = s[1]
      if tat < now then tat = now end
      return clamp(floor((tau - (tat - now)) / et), 0, p[3])
    end,
    expiry = function(s) return ceilticks(s[1]) end,
    nfields = function() return 1 end,
    mark = function(s) return s[1] end,
    -- GCRAState.Cancel: nothing once the slot may have come (now >= mark
    -- - tau); else the reservation's c*T less what later ones added.
    cancel = function(s, p, c, mk)
      local et = p[2] / p[1]
      local tau = p[3] * et
      if now >= mk - tau then return end
      local give = c * et - (s[1] - mk)
      if give > 0 then s[1] = s[1] - give end
    end,
    giveback = function(s, o, a, p, c, took, at)
      -- The count reserved [max(tat, took), a[1]); nothing to give back once
      -- at is past it (later counts may have started from their own now).
      local m = o[1]
      if m < took then m = took end
      -- (a[1] - m is exact: Sterbenz.) No floor at m: an earlier request in
      -- m may have been refunded since.
      if at < a[1] then s[1] = s[1] - (a[1] - m) end
    end,
  }
end
