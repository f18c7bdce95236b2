---------------------------------------------------------------- sliding_window_counter
-- s = { newest, counts[0..N] } (ring, bucket j at j mod (N+1)).
DEF[4] = function()
  local function cindex(s, p)
    local i = floordiv(now, p[4])
    if i < s[1] then return s[1], 0 end
    return i, now - i * p[4]
  end
  -- csums: the counts of the full buckets (i-N, i] and of the partial
  -- one i-N; a bucket outside the ring [newest-N, newest] counts 0.
  local function csums(s, p, i)
    local N, s1 = p[5], s[1]
    local m, full, partial = N + 1, 0, 0
    for j = i - N + 1, i do
      if j <= s1 and j >= s1 - N then full = full + s[2 + (j - floordiv(j, m) * m)] end
    end
    local q = i - N
    if q <= s1 and q >= s1 - N then partial = s[2 + (q - floordiv(q, m) * m)] end
    return full, partial
  end
  local function cest(p, full, partial, e)
    return full + partial * (p[4] - e) / p[4]
  end
  -- retry is allow's wait for a cost the estimate at now (bucket i,
  -- offset e, sums full and partial) does not fit: the first bucket j
  -- from i on, and the first instant in it, whose estimate fits.
  local function retry(s, p, cost, i, e, full, partial)
    local L, P, N = p[1], p[4], p[5]
    local s1, m = s[1], N + 1
    for j = i, i + N + 1 do
      local start = 0
      if j == i then
        start = e
      else
        -- bucket j is past the newest (j > i >= s1): it counts 0
        local q, b = j - N, 0
        if q <= s1 and q >= s1 - N then b = s[2 + (q - floordiv(q, m) * m)] end
        full, partial = full - b, b
      end
      if full + cost <= L then
        local g = start
        if partial > 0 then
          local x = L - cost - full
          g = clamp(ceilticks(P - x * P / partial), start, P - 1)
        end
        while g < P and not (full + partial * (P - g) / P + cost <= L) do g = g + 1 end
        if g < P then
          while g > start and full + partial * (P - (g - 1)) / P + cost <= L do g = g - 1 end
          return j * P + g - now
        end
      end
    end
    return (i + N + 1) * P - now
  end
  local function allow(s, p, cost)
    local i, e = cindex(s, p)
    local full, partial = csums(s, p, i)
    if cest(p, full, partial, e) + cost <= p[1] then return true, 0 end
    return false, retry(s, p, cost, i, e, full, partial)
  end
  return {
    init = function(p)
      local s = { floordiv(now, p[4]) }
      for k = 2, p[5] + 2 do s[k] = 0 end
      return s
    end,
    allow = allow,
    take = function(s, p, cost)
      local i = cindex(s, p)
      local m = p[5] + 1
      if i > s[1] then
        if i - s[1] > p[5] then
          for k = 2, m + 1 do s[k] = 0 end
        else
          for j = s[1] + 1, i do s[2 + (j - floordiv(j, m) * m)] = 0 end
        end
        s[1] = i
      end
      local k = 2 + (i - floordiv(i, m) * m)
      s[k] = s[k] + cost
    end,
    remaining = function(s, p)
      local i, e = cindex(s, p)
      local full, partial = csums(s, p, i)
      return clamp(p[1] - ceilticks(cest(p, full, partial, e)), 0, p[3])
    end,
    expiry = function(s, p) return (s[1] + p[5] + 1) * p[4] end,
    nfields = function(p) return p[5] + 2 end,
    -- SlidingCounterState.Return (mode 3, a hybrid lease's unused units):
    -- c units counted at mk come back to mk's bucket while it is in the
    -- ring, never below 0.
    cancel = function(s, p, c, mk)
      local j, N = floordiv(mk, p[4]), p[5]
      if j > s[1] or j < s[1] - N then return end
      local k = 2 + (j - floordiv(j, N + 1) * (N + 1))
      s[k] = s[k] - c
      if s[k] < 0 then s[k] = 0 end
    end,
    giveback = function(s, o, a, p, c)
      local i, N = a[1], p[5]
      if i <= s[1] and i >= s[1] - N then
        local k = 2 + (i - floordiv(i, N + 1) * (N + 1))
        s[k] = s[k] - c
        if s[k] < 0 then s[k] = 0 end
      end
    end,
    -- The handlers above for one hit, the sums over the ring taken once
    -- (counts are integers: adding the cost to the sum is exact). A count
    -- in the key's newest bucket changes only that bucket: SETRANGE
    -- writes its 8 bytes and keeps the key's TTL, whose instant (the end
    -- of the newest bucket's window) did not move. A key that lost its
    -- TTL gets it back at its next denial or at its next new bucket.
    -- A count is answered with the state after it (the short reply,
    -- common.lua) when that is under 9 doubles. With one bucket (the
    -- default precision) the two common counts come first, each in one
    -- step: within the newest bucket when it is now's, and a new key's.
    one = function(shadow, L, W, C, P, N)
      local p, m, nf = { L, W, C, P, N }, N + 1, N + 2
      local sc = {} -- the state, kept between calls (written over by each)
      local fmt = '<' .. string.rep('d', nf)
      local tfmt = '<' .. string.rep('d', nf + 1) -- now, then the state
      local OFF = {} -- OFF[k]: the byte offset of double k, in decimal
      for k = 2, nf do OFF[k] = string.format('%d', (k - 1) * 8) end
      return function(k, cost)
        local raw = rcall('GET', k)
        local s = sc
        if raw then
          if #raw ~= nf * 8 then error('tollgate: corrupt counter state') end
          if nf == 3 then -- one bucket (the default precision): no table made
            local a, b, c = sunpack('<ddd', raw)
            -- The common case first: a count that fits, in the newest
            -- bucket, which is now's (what the lines below do, in fewer
            -- steps). now's bucket and offset: floordiv(now, P) inlined;
            -- bucket i is in slot 2 + i mod 2, i - 1 in the other; b, c
            -- >= 0 also rule out NaN and -inf.
            if mode == 0 and cost <= C and b >= 0 and c >= 0 then
              local e = now % P
              if e < 0 then e = e + P elseif e >= P then e = e - P end
              if a == (now - e) / P then
                local cur, old, off = b, c, '8'
                if a % 2 == 1 then cur, old, off = c, b, '16' end
                if cur + old * (P - e) / P + cost <= L and cur + cost < 4503599627370496 then
                  cur = cur + cost
                  rcall('SETRANGE', k, off, spack('<d', cur))
                  if off == '8' then b = cur else c = cur end
                  -- The short reply (below).
                  if usetime == 0 then return spack('<ddd', a, b, c) end
                  return spack('<dddd', now, a, b, c)
                end
              end
            end
            s[1], s[2], s[3] = a, b, c
          else
            s = { sunpack(fmt, raw) }
            s[nf + 1] = nil
          end
          for j = 1, nf do
            local v = s[j]
            if v - v ~= 0 then error('tollgate: corrupt counter state') end
          end
        else
          if nf == 3 and mode == 0 and cost <= C and cost <= L then
            -- A new key of one bucket: its first count always fits (the
            -- estimate is 0). Written and answered as below, in fewer
            -- steps: floordiv(now, P) inlined, bucket i in slot 2 + i mod 2.
            local e = now % P
            if e < 0 then e = e + P elseif e >= P then e = e - P end
            local i, b, c = (now - e) / P, cost, 0
            if i % 2 == 1 then b, c = 0, cost end
            local v = spack('<ddd', i, b, c)
            rcall('SET', k, v, 'PX', px(ceilticks(((i + 2) * P - now) / 1000) + margin))
            if usetime == 0 then return v end
            return spack('<dddd', now, i, b, c)
          end
          s[1] = floordiv(now, P)
          for j = 2, nf do s[j] = 0 end
        end
        local s1 = s[1]
        local i, e = cindex(s, p)
        local full, partial = csums(s, p, i)
        local ok, ra, never, counted = false, 0, 0, false
        if cost > C then
          never = 1
        elseif cest(p, full, partial, e) + cost <= L then
          ok, counted = true, mode == 0
        else
          ra = retry(s, p, cost, i, e, full, partial)
        end
        if counted then
          local kk = 2 + (i - floordiv(i, m) * m)
          if i ~= s1 then
            if i - s1 > N then
              for j = 2, nf do s[j] = 0 end
            else
              for j = s1 + 1, i do s[2 + (j - floordiv(j, m) * m)] = 0 end
            end
            s[1] = i
          end
          s[kk] = s[kk] + cost
          local v
          if raw and i == s1 then
            rcall('SETRANGE', k, OFF[kk], spack('<d', s[kk]))
          else
            -- (i + N + 1) * P > now: i is now's bucket or a later one
            if nf == 3 then v = spack('<ddd', s[1], s[2], s[3]) else v = spack(fmt, tunpack(s, 1, nf)) end
            rcall('SET', k, v, 'PX', px(ceilticks(((i + N + 1) * P - now) / 1000) + margin))
          end
          -- The short reply (common.lua): the state after the count, when
          -- it is shorter than the full reply (9 doubles); the gateway
          -- derives remaining and reset from it.
          if nf + usetime < 9 then
            if usetime == 1 then
              if nf == 3 then return spack('<dddd', now, s[1], s[2], s[3]) end
              return spack(tfmt, now, tunpack(s, 1, nf))
            end
            if v then return v end
            if nf == 3 then return spack('<ddd', s[1], s[2], s[3]) end
            return spack(fmt, tunpack(s, 1, nf))
          end
          if i == s1 then full = full + cost else full, partial = csums(s, p, i) end
        elseif raw and rcall('PTTL', k) == -1 then
          local x = (s1 + N + 1) * P
          if x <= now then
            rcall('DEL', k)
          else
            rcall('PEXPIRE', k, px(ceilticks((x - now) / 1000) + margin))
          end
        end
        local est = cest(p, full, partial, e)
        local r, reset = clamp(L - ceilticks(est), 0, C), 0
        if r < C and not (est + r + 1 <= L) then reset = retry(s, p, r + 1, i, e, full, partial) end
        -- the full reply, packed inline (common.lua "Reply")
        return spack('<ddddddddd', (ok or shadow) and 1 or 0, now, counted and 1 or 0, never, raw and 1 or 0,
          ok and 1 or 0, ra, r, reset)
      end
    end,
  }
end
