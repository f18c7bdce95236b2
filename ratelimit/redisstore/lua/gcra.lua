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
  local function allow(s, p, cost)
    local et = p[2] / p[1]
    local tau = p[3] * et
    if gallowed(s, now, cost, et, tau) then return true, 0 end
    local tat = s[1]
    if tat < now then tat = now end
    tat = tat + cost * et
    local d = ceilticks(tat - tau - now)
    if d < 1 then d = 1 end
    if d > MAXWAIT then d = MAXWAIT end
    local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
    while not gallowed(s, now + d, cost, et, tau) and guard < 100000 and d < MAXWAIT do d, guard = d + 1, guard + 1 end
    if not gallowed(s, now + d, cost, et, tau) then return false, MAXWAIT end
    while d > 1 and gallowed(s, now + d - 1, cost, et, tau) do d = d - 1 end
    return false, d
  end
  return {
    init = function() return { now } end,
    allow = allow,
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
    -- The handlers above for one hit, T and tau computed once per limit
    -- (the same operations on the same values: the same doubles).
    one = function(shadow, L, W, C)
      local p, s = { L, W, C }, {}
      local et = W / L
      local tau = C * et
      return function(k, cost)
        local raw = rcall('GET', k)
        local tat = now
        if raw then
          if #raw ~= 8 then error('tollgate: corrupt counter state') end
          tat = sunpack('<d', raw)
          if tat - tat ~= 0 then error('tollgate: corrupt counter state') end
        end
        s[1] = tat
        local ok, ra, never, counted = false, 0, 0, false
        if cost > C then
          never = 1
        elseif gallowed(s, now, cost, et, tau) then
          ok, counted = true, mode == 0
        else
          ok, ra = allow(s, p, cost)
        end
        if counted then
          if tat < now then tat = now end
          tat = tat + cost * et
          s[1] = tat
          local x, v = ceilticks(tat), spack('<d', tat)
          if x <= now then
            rcall('DEL', k)
          else
            rcall('SET', k, v, 'PX', px(ceilticks((x - now) / 1000) + margin))
          end
          -- The short reply (common.lua): the state written; the gateway
          -- derives remaining and reset from it.
          if usetime == 0 then return v end
          return spack('<dd', now, tat)
        elseif raw and rcall('PTTL', k) == -1 then
          local x = ceilticks(tat)
          if x <= now then
            rcall('DEL', k)
          else
            rcall('PEXPIRE', k, px(ceilticks((x - now) / 1000) + margin))
          end
        end
        local t = tat
        if t < now then t = now end
        local r, reset = clamp(floor((tau - (t - now)) / et), 0, C), 0
        if r < C and not gallowed(s, now, r + 1, et, tau) then
          local _
          _, reset = allow(s, p, r + 1)
        end
        -- the full reply, packed inline (common.lua "Reply")
        return spack('<ddddddddd', (ok or shadow) and 1 or 0, now, counted and 1 or 0, never, raw and 1 or 0,
          ok and 1 or 0, ra, r, reset)
      end
    end,
  }
end
