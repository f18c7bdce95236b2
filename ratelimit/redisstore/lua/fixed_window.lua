---------------------------------------------------------------- fixed windows
-- fixed_window: s = { window start, count }.
DEF[1] = function()
  -- the window start and count in effect at now.
  local function at(s, p)
    local start = floordiv(now, p[2]) * p[2]
    if start > s[1] then return start, 0 end
    return s[1], s[2]
  end
  return {
    init = function(p) return { floordiv(now, p[2]) * p[2], 0 } end,
    allow = function(s, p, cost)
      local start, count = at(s, p)
      if count + cost <= p[1] then return true, 0 end
      return false, start + p[2] - now
    end,
    take = function(s, p, cost)
      local start, count = at(s, p)
      s[1], s[2] = start, count + cost
    end,
    remaining = function(s, p)
      local _, count = at(s, p)
      return clamp(p[1] - count, 0, p[3])
    end,
    expiry = function(s, p) return s[1] + p[2] end,
    nfields = function() return 2 end,
    -- FixedWindowState.Return (mode 3, a hybrid lease's unused units):
    -- c units counted at mk come back only to mk's window, never below 0.
    cancel = function(s, p, c, mk)
      if s[1] ~= floordiv(mk, p[2]) * p[2] then return end
      s[2] = s[2] - c
      if s[2] < 0 then s[2] = 0 end
    end,
    giveback = function(s, o, a, p, c)
      if s[1] == a[1] then s[2] = s[2] - c end
      if s[2] < 0 then s[2] = 0 end
    end,
    -- The handlers above, inlined for one hit. A count in the window the
    -- key already holds changes only the count: SETRANGE writes its 8
    -- bytes and keeps the key's TTL, which the window's first count set
    -- to the window's end (the same instant a SET PX would set again). A
    -- key that lost its TTL gets it back at its next denial or at the
    -- first count of a later window.
    one = function(shadow, L, W, C)
      return function(k, cost)
        local raw = rcall('GET', k)
        -- now's window start: floordiv(now, W) * W inlined (one Lua
        -- call less), now - (now mod W), exact below 2^53.
        local nw = now % W
        if nw < 0 then nw = nw + W elseif nw >= W then nw = nw - W end
        nw = now - nw
        local ws, count, s1 = nw, 0, nil
        if raw then
          if #raw ~= 16 then error('tollgate: corrupt counter state') end
          local s2
          s1, s2 = sunpack('<dd', raw)
          -- The common case first: a count within the window the key
          -- holds, which is now's (what the lines below do, in fewer
          -- steps; s2 >= 0 also rules out NaN and -inf).
          if s1 == nw and mode == 0 and cost <= C and s2 + cost <= L and s2 >= 0
            and s2 + cost < 4503599627370496 then
            count = s2 + cost
            rcall('SETRANGE', k, '8', spack('<d', count))
            if usetime == 0 then return count end
            return spack('<dd', now, count)
          end
          if s1 - s1 ~= 0 or s2 - s2 ~= 0 then error('tollgate: corrupt counter state') end
          if not (ws > s1) then ws, count = s1, s2 end
        end
        local ok, ra, never, counted = false, 0, 0, false
        if cost > C then
          never = 1
        elseif count + cost <= L then
          ok, counted = true, mode == 0
        else
          ra = ws + W - now
        end
        if counted then
          count = count + cost
          if ws == s1 then
            rcall('SETRANGE', k, '8', spack('<d', count))
          else
            -- ws + W > now: ws is now's window or a later one
            rcall('SET', k, spack('<dd', ws, count), 'PX', px(ceilticks((ws + W - now) / 1000) + margin))
          end
          -- The short reply (common.lua): the count in now's window; the
          -- gateway derives remaining and reset from it.
          if ws == nw and count < 4503599627370496 then
            if usetime == 0 then return count end
            return spack('<dd', now, count)
          end
        elseif raw and rcall('PTTL', k) == -1 then
          local e = s1 + W
          if e <= now then
            rcall('DEL', k)
          else
            rcall('PEXPIRE', k, px(ceilticks((e - now) / 1000) + margin))
          end
        end
        local r, reset = clamp(L - count, 0, C), 0
        if r < C and not (count + r + 1 <= L) then reset = ws + W - now end
        -- the full reply, packed inline (common.lua "Reply")
        return spack('<ddddddddd', (ok or shadow) and 1 or 0, now, counted and 1 or 0, never, raw and 1 or 0,
          ok and 1 or 0, ra, r, reset)
      end
    end,
  }
end

-- fixed_window_elastic: s = { end of the box, count }.
DEF[2] = function()
  return {
    init = function() return { now, 0 } end,
    allow = function(s, p, cost)
      local count = s[2]
      if now >= s[1] then count = 0 end
      if count + cost <= p[1] then return true, 0 end
      return false, s[1] - now
    end,
    take = function(s, p, cost)
      local count = s[2]
      if now >= s[1] then count = 0 end
      s[2] = count + cost
      if s[1] < now + p[2] then s[1] = now + p[2] end
    end,
    remaining = function(s, p)
      local count = s[2]
      if now >= s[1] then count = 0 end
      return clamp(p[1] - count, 0, p[3])
    end,
    expiry = function(s) return s[1] end,
    nfields = function() return 2 end,
    giveback = function(s, o, a, p, c)
      if s[1] == a[1] and s[2] == a[2] then
        s[1], s[2] = o[1], a[2] - c
      elseif s[1] < a[1] + p[2] then -- not a new box since
        s[2] = s[2] - c
        if s[2] < 0 then s[2] = 0 end
      end
    end,
  }
end
