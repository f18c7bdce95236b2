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
      -- cost <= L - count, not count + cost <= L: the difference is
      -- exact, while the sum of a count and a cost near 2^53
      -- (ratelimit.MaxLimit) rounds down to the limit and would admit
      -- past it. Every comparison with the limit below is written so.
      if cost <= p[1] - count then return true, 0 end
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
          if s1 == nw and mode == 0 and cost <= C and cost <= L - s2 and s2 >= 0
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
        elseif cost <= L - count then
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
        if r < C and not (r + 1 <= L - count) then reset = ws + W - now end
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
      if cost <= p[1] - count then return true, 0 end
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

---------------------------------------------------------------- fixed windows, several hits
-- FWP[limit argument] is { L, W, C, shadow } of a one-window fixed_window
-- limit (its packed parameters, ARGV[1+h]): parsed once, not on every
-- call, as ONE keeps the one-hit deciders (driver.lua); emptied when it
-- holds 256 limits.
local FWP, nfwp = {}, 0
-- FWH[H] unpacks the fixed-window header of H hits; FWS is the per-hit
-- scratch of a call (the library keeps it: no table per call).
local FWH, FWS = {}, {}

-- fixedn decides a call whose hits are all ordinary hits on one-window
-- fixed_window limits, on distinct keys, counted or checked, without old
-- values (the gateway chooses it: the header is the fixed-window header,
-- common.lua): what the driver's general path decides, writes and
-- answers, without its per-hit tables, handler calls and decoded
-- states. Pass 1 reads every key (one MGET) and checks it; pass 2 counts only if every
-- enforced hit allows (a call denied by one hit counts in none), with
-- SETRANGE of the count within the window the key holds (its TTL already
-- ends with the window) and SET PX for a new window. A call counted in
-- every hit, each in now's window, is answered with the counts alone
-- (packed doubles, now first under the store clock: shorter than any
-- full reply of its hits); any other with the general path's full reply.
--
-- t, when given, is Redis's TIME already read for this call (fixed2's
-- fallback), so that a call reads it once.
local function fixedn(KEYS, ARGV, hdr, t)
  local H = #hdr / 8 - 3
  local hf = FWH[H]
  if not hf then
    hf = '<' .. string.rep('d', H + 3)
    FWH[H] = hf
  end
  if not rcall then rcall, tonum = redis.call, tonumber end
  local f
  local S = FWS
  now, f, margin, S[1], S[2], S[3], S[4] = sunpack(hf, hdr)
  -- the costs now in S[1..H] (at most 4 hits: the header's length
  -- tells it from the others)
  for h = H, 1, -1 do S[h * 12] = S[h] end
  mode = f % 2
  if f >= 2 then
    usetime, now = 1, t or redistime()
  else
    usetime = 0
  end
  local allowed, short = true, true
  -- every key in one MGET: one command's dispatch, not one per hit
  local R
  if H == 2 then
    R = rcall('MGET', KEYS[1], KEYS[2])
  else
    R = rcall('MGET', tunpack(KEYS, 1, H))
  end
  -- Pass 1. Per hit h at b = h*12: +0 cost, +1 L, +2 W, +3 C, +4 shadow,
  -- +5 raw, +6 window start, +7 count, +8 ok, +9 retry, +10 the stored
  -- window start (when raw); b-1 never
  for h = 1, H do
    local b = h * 12
    local la = ARGV[1 + h]
    local p = FWP[la]
    if not p then
      local alg, shadow, nw, L, W, C = sunpack('<dddddd', la)
      if alg ~= 1 or nw ~= 1 or #la ~= 64 then error('tollgate: a fixed-window header for another limit') end
      p = { L, W, C, shadow == 1 }
      if nfwp >= 256 then FWP, nfwp = {}, 0 end
      FWP[la], nfwp = p, nfwp + 1
    end
    local L, W, C = p[1], p[2], p[3]
    local raw = R[h]
    local nw = now % W
    if nw < 0 then nw = nw + W elseif nw >= W then nw = nw - W end
    nw = now - nw
    local ws, count, s1 = nw, 0, nil
    if raw then
      if #raw ~= 16 then error('tollgate: corrupt counter state') end
      local s2
      s1, s2 = sunpack('<dd', raw)
      if s1 - s1 ~= 0 or s2 - s2 ~= 0 then error('tollgate: corrupt counter state') end
      if not (nw > s1) then ws, count = s1, s2 end
      if ws ~= nw then short = false end
    end
    local cost = S[b]
    local ok, ra, never = false, 0, 0
    if cost > C then
      never = 1
    elseif cost <= L - count then
      ok = true
    else
      ra = ws + W - now
    end
    if not ok then
      short = false
      if not p[4] then allowed = false end
    end
    S[b + 1], S[b + 2], S[b + 3], S[b + 4], S[b + 5], S[b + 6], S[b + 7], S[b + 8], S[b + 9], S[b + 10], S[b - 1] =
      L, W, C, p[4], raw, ws, count, ok, ra, s1, never
  end
  if mode ~= 0 or not allowed then short = false end
  -- Pass 2: count (only if every enforced hit allows), heal a lost TTL.
  for h = 1, H do
    local b = h * 12
    local k, raw, ws, W = KEYS[h], S[b + 5], S[b + 6], S[b + 2]
    if mode == 0 and allowed and S[b + 8] then
      local count = S[b + 7] + S[b]
      S[b + 7] = count
      if count >= 4503599627370496 then short = false end
      if raw and ws == S[b + 10] then
        rcall('SETRANGE', k, '8', spack('<d', count))
      else
        rcall('SET', k, spack('<dd', ws, count), 'PX', px(ceilticks((ws + W - now) / 1000) + margin))
      end
    elseif raw and rcall('PTTL', k) == -1 then
      local e = S[b + 10] + W
      if e <= now then
        rcall('DEL', k)
      else
        rcall('PEXPIRE', k, px(ceilticks((e - now) / 1000) + margin))
      end
    end
  end
  if short then
    -- packed like the full reply, which is longer (2 + 7H doubles)
    if H == 2 then
      if usetime == 0 then return spack('<dd', S[19], S[31]) end
      return spack('<ddd', now, S[19], S[31])
    end
    local out, n = {}, 0
    if usetime == 1 then out[1], n = now, 1 end
    for h = 1, H do out[n + h] = S[h * 12 + 7] end
    n = n + H
    return spack('<' .. string.rep('d', n), tunpack(out, 1, n))
  end
  -- The full reply (common.lua "Reply"), as the general path packs it.
  local out = { allowed and 1 or 0, now }
  local n = 2
  for h = 1, H do
    local b = h * 12
    local L, W, C, ws, count, ok = S[b + 1], S[b + 2], S[b + 3], S[b + 6], S[b + 7], S[b + 8]
    local counted = mode == 0 and allowed and ok
    local r, reset = clamp(L - count, 0, C), 0
    if r < C and not (r + 1 <= L - count) then reset = ws + W - now end
    out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5], out[n + 6], out[n + 7] =
      counted and 1 or 0, S[b - 1], S[b + 5] and 1 or 0, ok and 1 or 0, S[b + 9], r, reset
    n = n + 7
  end
  return spack('<' .. string.rep('d', n), tunpack(out, 1, n))
end

-- fwp returns FWP[la], parsing the limit on first use.
local function fwp(la)
  local p = FWP[la]
  if p then return p end
  local alg, shadow, nw, L, W, C = sunpack('<dddddd', la)
  if alg ~= 1 or nw ~= 1 or #la ~= 64 then error('tollgate: a fixed-window header for another limit') end
  p = { L, W, C, shadow == 1 }
  if nfwp >= 256 then FWP, nfwp = {}, 0 end
  FWP[la], nfwp = p, nfwp + 1
  return p
end

-- fwat returns the window start and count in effect at now of a fixed
-- window of W stored as raw (false: no key), the stored start (nil: no
-- key) and now's window start.
local function fwat(raw, W)
  local nw = now % W
  if nw < 0 then nw = nw + W elseif nw >= W then nw = nw - W end
  nw = now - nw
  if not raw then return nw, 0, nil, nw end
  if #raw ~= 16 then error('tollgate: corrupt counter state') end
  local s1, s2 = sunpack('<dd', raw)
  if s1 - s1 ~= 0 or s2 - s2 ~= 0 then error('tollgate: corrupt counter state') end
  if nw > s1 then return nw, 0, s1, nw end
  return s1, s2, s1, nw
end

-- fwcount writes count c of the window starting at ws to key k, whose
-- stored window started at o: the count alone within it (SETRANGE keeps
-- the TTL), the whole state with its TTL otherwise.
local function fwcount(k, ws, c, o, W)
  if ws == o then
    rcall('SETRANGE', k, '8', spack('<d', c))
  else
    rcall('SET', k, spack('<dd', ws, c), 'PX', px(ceilticks((ws + W - now) / 1000) + margin))
  end
end

-- fixed2 is fixedn for two hits in the case that is nearly every call of
-- an Envoy rate limit service: both allowed and counted in now's window,
-- in locals, without fixedn's scratch table. Any other case (a denial, a
-- check, a cost past the capacity, a window the clock stepped back from)
-- goes to fixedn before anything is written.
local function fixed2(KEYS, ARGV, hdr)
  if not rcall then rcall, tonum = redis.call, tonumber end
  local f, c1, c2
  now, f, margin, c1, c2 = sunpack('<ddddd', hdr)
  if f ~= 0 and f ~= 2 then return fixedn(KEYS, ARGV, hdr) end
  mode = 0
  if f == 2 then
    usetime, now = 1, redistime()
  else
    usetime = 0
  end
  local p1, p2 = fwp(ARGV[2]), fwp(ARGV[3])
  local R = rcall('MGET', KEYS[1], KEYS[2])
  local W1, W2 = p1[2], p2[2]
  local ws1, n1, o1, nw1 = fwat(R[1], W1)
  local ws2, n2, o2, nw2 = fwat(R[2], W2)
  if ws1 ~= nw1 or ws2 ~= nw2 or c1 > p1[3] or c2 > p2[3] or c1 > p1[1] - n1 or c2 > p2[1] - n2
    or n1 + c1 >= 4503599627370496 or n2 + c2 >= 4503599627370496 then
    if usetime == 1 then return fixedn(KEYS, ARGV, hdr, now) end
    return fixedn(KEYS, ARGV, hdr)
  end
  n1, n2 = n1 + c1, n2 + c2
  fwcount(KEYS[1], ws1, n1, o1, W1)
  fwcount(KEYS[2], ws2, n2, o2, W2)
  if usetime == 0 then return spack('<dd', n1, n2) end
  return spack('<ddd', now, n1, n2)
end
