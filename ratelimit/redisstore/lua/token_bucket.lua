---------------------------------------------------------------- token_bucket
-- s = { tokens, last refill instant }.
DEF[5] = function()
  local function tblevel(s, p, t)
    local elapsed = t - s[2]
    if elapsed < 0 then elapsed = 0 end
    local v = s[1] + elapsed * p[1] / p[2]
    if v < p[3] then return v end
    return p[3]
  end
  local function allow(s, p, cost)
    local t = tblevel(s, p, now)
    if t >= cost then return true, 0 end
    local d = s[2] - now
    if d < 0 then d = 0 end
    d = d + ceilticks((cost - t) * p[2] / p[1])
    if d < 1 then d = 1 end
    if d > MAXWAIT then d = MAXWAIT end
    local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
    while tblevel(s, p, now + d) < cost and guard < 100000 and d < MAXWAIT do d, guard = d + 1, guard + 1 end
    if tblevel(s, p, now + d) < cost then return false, MAXWAIT end
    while d > 1 and tblevel(s, p, now + d - 1) >= cost do d = d - 1 end
    return false, d
  end
  return {
    init = function(p) return { p[3], now } end,
    allow = allow,
    take = function(s, p, cost)
      s[1] = tblevel(s, p, now) - cost
      if s[2] < now then s[2] = now end
    end,
    remaining = function(s, p)
      return clamp(floor(tblevel(s, p, now)), 0, p[3])
    end,
    expiry = function(s, p) return s[2] + ceilticks((p[3] - s[1]) * p[2] / p[1]) + 1 end,
    nfields = function() return 2 end,
    -- A reservation moved the bucket's instant to its slot (TokenBucketState.Mark).
    mark = function(s) return s[2] end,
    -- TokenBucketState.Cancel: nothing once the slot has come or a later
    -- reservation moved the instant past it; else the instant moves back
    -- by the refill time of the cost, rounded down to a tick.
    cancel = function(s, p, c, mk)
      if now >= mk or s[2] ~= mk then return end
      s[2] = s[2] - floor(c * p[2] / p[1])
    end,
    giveback = function(s, o, a, p, c, took, at)
      -- Nothing to give back once the bucket would have refilled to B by at
      -- even with the count (its c tokens would all have overflowed).
      local el = at - a[2]
      if el < 0 then el = 0 end
      if tblevel(o, p, took) + el * p[1] / p[2] - p[3] < c then
        s[1] = s[1] + c
        if s[1] > p[3] then s[1] = p[3] end
      end
    end,
    -- The handlers above for one hit, the level at now computed once.
    one = function(shadow, L, W, C)
      local p, s = { L, W, C }, {}
      return function(k, cost)
        local raw = rcall('GET', k)
        local s1, s2 = C, now
        if raw then
          if #raw ~= 16 then error('tollgate: corrupt counter state') end
          s1, s2 = sunpack('<dd', raw)
          if s1 - s1 ~= 0 or s2 - s2 ~= 0 then error('tollgate: corrupt counter state') end
        end
        s[1], s[2] = s1, s2
        local el = now - s2
        if el < 0 then el = 0 end
        local lv = s1 + el * L / W
        if not (lv < C) then lv = C end
        local ok, ra, never, counted = false, 0, 0, false
        if cost > C then
          never = 1
        elseif lv >= cost then
          ok, counted = true, mode == 0
        else
          ok, ra = allow(s, p, cost)
        end
        local x
        if counted then
          s1 = lv - cost
          if s2 < now then s2 = now end
          s[1], s[2] = s1, s2
          lv = s1 -- the level at now: no time elapsed since s2
          if not (lv < C) then lv = C end
          x = s2 + ceilticks((C - s1) * W / L) + 1
          local v = spack('<dd', s1, s2)
          if x <= now then
            rcall('DEL', k)
          else
            rcall('SET', k, v, 'PX', px(ceilticks((x - now) / 1000) + margin))
          end
          -- The short reply (common.lua): the state written; the gateway
          -- derives remaining and reset from it.
          if usetime == 0 then return v end
          return spack('<ddd', now, s1, s2)
        elseif raw and rcall('PTTL', k) == -1 then
          x = s2 + ceilticks((C - s1) * W / L) + 1
          if x <= now then
            rcall('DEL', k)
          else
            rcall('PEXPIRE', k, px(ceilticks((x - now) / 1000) + margin))
          end
        end
        local r, reset = clamp(floor(lv), 0, C), 0
        if r < C and not (lv >= r + 1) then
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
