---------------------------------------------------------------- state I/O

local function decode(A, raw, ps)
  local states = {}
  if raw == nil then
    for w = 1, #ps do states[w] = A.init(ps[w]) end
    return states
  end
  if A.decode then return A.decode(raw, ps) end
  local pos = 1
  local need = 0
  for w = 1, #ps do need = need + A.nfields(ps[w]) end
  if #raw ~= need * 8 then error('tollgate: corrupt counter state') end
  for w = 1, #ps do
    local nf = A.nfields(ps[w])
    local s
    if nf == 1 then
      s = { sunpack('<d', raw, pos) }
    elseif nf == 2 then
      s = { sunpack('<dd', raw, pos) }
    else
      s = { sunpack('<' .. string.rep('d', nf), raw, pos) }
    end
    pos = s[nf + 1]
    s[nf + 1] = nil
    for k = 1, nf do
      local v = s[k]
      if v ~= v or v == 1 / 0 or v == -1 / 0 then error('tollgate: corrupt counter state') end
    end
    states[w] = s
  end
  return states
end

local function encode(A, states, ps)
  if A.encode then return A.encode(states, ps) end
  local out = ''
  for w = 1, #states do
    local s, nf = states[w], A.nfields(ps[w])
    if nf == 1 then
      out = out .. spack('<d', s[1])
    elseif nf == 2 then
      out = out .. spack('<dd', s[1], s[2])
    else
      out = out .. spack('<' .. string.rep('d', nf), tunpack(s, 1, nf))
    end
  end
  return out
end

-- ttl1 is ttl of one window's state.
local function ttl1(A, s, p)
  local e = A.expiry(s, p)
  if e == nil then return nil end
  if not e or e <= now then return false end
  return ceilticks((e - now) / 1000) + margin
end

-- TTL in ms: until the latest window expiry, plus margin; nil = lease;
-- false = the state is fresh (delete the key).
local function ttl(A, states, ps)
  local exp
  for w = 1, #states do
    local e = A.expiry(states[w], ps[w])
    if e == nil then return nil end
    if e and (not exp or e > exp) then exp = e end
  end
  if not exp or exp <= now then return false end
  return ceilticks((exp - now) / 1000) + margin
end

-- reset is the wait until one more unit than remaining r would be
-- allowed (0 when none is used), by the window's own allow.
local function reset(A, s, p, r)
  if r >= p[3] then return 0 end
  local ok, ra = A.allow(s, p, r + 1)
  if ok then return 0 end
  return ra
end

-- store writes states to key k with a TTL just past their expiry (KEEPTTL
-- for a held lease), or deletes k when they are fresh.
local function store(k, A, states, ps, v)
  local t = ttl(A, states, ps)
  if t == false then
    redis.call('DEL', k)
  elseif t == nil then
    redis.call('SET', k, v or encode(A, states, ps), 'KEEPTTL')
  else
    redis.call('SET', k, v or encode(A, states, ps), 'PX', px(t))
  end
end

-- handler returns the handler table of algorithm alg, built on first use.
local function handler(alg)
  local A = ALG[alg]
  if A then return A end
  local def = DEF[alg]
  if not def then error('tollgate: unknown algorithm ' .. alg) end
  A = def()
  ALG[alg] = A
  return A
end

---------------------------------------------------------------- one hit

-- FMT[nf] packs nf doubles.
local FMT = {}

-- generic1 makes the one-hit decider (handler field one, common.lua) of
-- a limit of algorithm A with one window of parameters p and a state of
-- a fixed number of doubles (every algorithm but the log and
-- concurrency), from A's handlers: the work of the general path below,
-- without its per-hit tables and loops. The decider returns what decide
-- returns.
local function generic1(A, shadow, p)
  local s = {}
  local nf = A.nfields(p)
  local f = FMT[nf]
  if not f then
    f = '<' .. string.rep('d', nf)
    FMT[nf] = f
  end
  local C = p[3]
  return function(k, cost)
    local raw = rcall('GET', k)
    if raw then
      if #raw ~= nf * 8 then error('tollgate: corrupt counter state') end
      if nf == 1 then
        s[1] = sunpack('<d', raw)
      elseif nf == 2 then
        s[1], s[2] = sunpack('<dd', raw)
      else
        local v = { sunpack(f, raw) }
        for i = 1, nf do s[i] = v[i] end
      end
      for i = 1, nf do
        local v = s[i]
        if v - v ~= 0 then error('tollgate: corrupt counter state') end
      end
    else
      s = A.init(p)
    end
    local ok, ra, never = false, 0, 0
    if cost > C then
      never = 1
    else
      ok, ra = A.allow(s, p, cost)
    end
    local allowed = ok or shadow
    local counted = mode == 0 and allowed and ok
    if counted then
      A.take(s, p, cost)
      local t = ttl1(A, s, p)
      if t == false then
        rcall('DEL', k)
      else
        local v
        if nf == 1 then
          v = spack('<d', s[1])
        elseif nf == 2 then
          v = spack('<dd', s[1], s[2])
        else
          v = spack(f, tunpack(s, 1, nf))
        end
        rcall('SET', k, v, 'PX', px(t or lease))
      end
    elseif raw and rcall('PTTL', k) == -1 then
      local t = ttl1(A, s, p)
      if t == false then rcall('DEL', k) else rcall('PEXPIRE', k, px(t or lease)) end
    end
    local r = A.remaining(s, p)
    -- the full reply, packed inline (common.lua "Reply")
    return spack('<ddddddddd', allowed and 1 or 0, now, counted and 1 or 0, never, raw and 1 or 0,
      ok and 1 or 0, ra, r, reset(A, s, p, r))
  end
end

-- ONE[limit argument] is the one-hit decider of that limit (the packed
-- parameters ARGV[2] of a one-hit call), false for a limit without one:
-- parsed and built once, not on every call. Lua keeps one copy of equal
-- strings, so the lookup compares a pointer. Bounded: emptied when it
-- holds 256 limits.
local ONE, none = {}, 0

-- one1 builds and caches ONE[la].
local function one1(la)
  local alg, shadow, nw, L, W, Cap, P, N = sunpack('<dddddddd', la)
  local A = handler(alg)
  local f = false
  if nw == 1 and not A.lease and not A.decode and not A.distinct then
    if A.one then
      f = A.one(shadow == 1, L, W, Cap, P, N)
    else
      f = generic1(A, shadow == 1, { L, W, Cap, P, N })
    end
  end
  if none >= 256 then ONE, none = {}, 0 end
  ONE[la], none = f, none + 1
  return f
end

---------------------------------------------------------------- main

local function decide(KEYS, ARGV)
  if not sunpack then
    floor, tunpack, spack, sunpack = math.floor, unpack, struct.pack, struct.unpack
  end
  local hdr = ARGV[1]
  -- One hit, short header (common.lua): straight to its limit's decider
  -- (which reads now, mode, usetime and margin, nothing else of the
  -- header).
  if #hdr == 32 then
    local f, cost
    now, cost, f, margin = sunpack('<dddd', hdr)
    mode = f % 2
    local la = ARGV[2]
    local d = ONE[la]
    if d == nil then d = one1(la) end
    if not d then error('tollgate: a one-hit header for a limit without a one-hit decider') end
    if not rcall then rcall, tonum = redis.call, tonumber end
    if f >= 2 then
      usetime, now = 1, redistime()
    else
      usetime = 0
    end
    return d(KEYS[1], cost)
  end
  -- Two to four ordinary hits on one-window fixed windows (the
  -- fixed-window header, 40 to 56 bytes: common.lua): fixed_window.lua.
  if #hdr == 40 then return fixed2(KEYS, ARGV, hdr) end
  if #hdr < 64 then return fixedn(KEYS, ARGV, hdr) end
  local hpos, cost1
  leasenow = nil
  PEN, npen = nil, 0
  -- One hit: its cost is the header's last double. (A hit mode, a max
  -- delay or a penalty lengthens the header or the limit: the general
  -- path handles them.)
  -- (With want-old, a cluster's decide, the general path reports the
  -- values read and written.)
  if #hdr == 64 then
    now, usetime, mode, wantold, lease, margin, nhits, cost1 = sunpack('<dddddddd', hdr)
    local la = ARGV[2]
    if mode ~= 2 and mode ~= 3 and mode ~= 4 and wantold == 0 and #la == 64 then
      local f = ONE[la]
      if f == nil then f = one1(la) end
      if f then
        if not rcall then rcall, tonum = redis.call, tonumber end
        if usetime == 1 then
          now = redistime()
        end
        return f(KEYS[1], cost1)
      end
    end
  end
  now, usetime, mode, wantold, lease, margin, nhits, hpos = sunpack('<ddddddd', hdr)
  -- the first member argument (after the limits and a refund's arguments)
  local mbase = 2 + nhits
  if mode == 2 then mbase = mbase + 1 + 4 * nhits end
  if usetime == 1 then
    now = redistime()
  end

  -- Per hit h, at b = (h-1)*12 in HIT: 1 handler table, 2 shadow, 3 cost,
  -- 4 params per window, 5 value read (nil if none), 6 states per window,
  -- 7 earlier hit on the same key, 8 ok, 9 never, 10 offset of its windows'
  -- (ok, retry) pairs in WR, 11 dirty, 12 value written. Flat tables: every
  -- table costs an allocation.
  local HIT, WR = {}, {}
  -- Hit modes and delays (modes.lua), made only when a call uses them:
  -- HM[h] the hit's mode (after the costs in the header, when present),
  -- HD[h] its limit's max delay (after the windows of its limit),
  -- DL[h] / MK[h] the delay and mark of a hit that reserved a slot.
  local HM, HD, DL, MK
  if #hdr >= 8 * (7 + 2 * nhits) then HM = {} end
  for h = 1, nhits do
    local b = (h - 1) * 12
    local cost
    cost, hpos = sunpack('<d', hdr, hpos)
    local pa = ARGV[1 + h]
    local alg, shadow, nw, L, W, Cap, P, N, pos = sunpack('<dddddddd', pa)
    local ps = { { L, W, Cap, P, N } }
    for w = 2, nw do
      L, W, Cap, P, N, pos = sunpack('<ddddd', pa, pos)
      ps[w] = { L, W, Cap, P, N }
    end
    if pos <= #pa then
      -- max delay (0 when the limit has none but a penalty follows)
      HD = HD or {}
      HD[h], pos = sunpack('<d', pa, pos)
    end
    if HM then HM[h] = sunpack('<d', hdr, 8 * (7 + nhits + h - 1) + 1) end
    HIT[b + 1], HIT[b + 2], HIT[b + 3], HIT[b + 4] = handler(alg), shadow == 1, cost, ps
    if pos <= #pa then penalty(h, sunpack('<d', pa, pos)) end
  end
  if PEN then boxes(KEYS, HM) end
  -- DV[h] is the value of distinct hit h (distinct.lua): after the
  -- members, when any hit is a concurrency hit, else after the limits.
  local DV
  for h = 1, nhits do
    if HIT[(h - 1) * 12 + 1].distinct then DV = {} end
  end
  if DV then
    local vb = mbase
    for h = 1, nhits do
      if HIT[(h - 1) * 12 + 1].lease then vb = mbase + nhits break end
    end
    for h = 1, nhits do DV[h] = ARGV[vb + h - 1] end
  end

  if mode == 3 then return cancel(HIT, KEYS, ARGV[2 + nhits], decode, store) end
  if mode == 4 then return settle(HIT, KEYS, ARGV, decode, store) end

  -- Refund: per key, the units every counted hit on it took, given back.
  if mode == 2 then
    local took, at = sunpack('<dd', ARGV[2 + nhits])
    if usetime == 1 then at = now end
    local check, a0, total = now, 3 + nhits, {}
    -- A concurrency slot is given back by its member: exact, whatever
    -- happened to the key since.
    for h = 1, nhits do
      local A = HIT[(h - 1) * 12 + 1]
      if A.lease and ARGV[a0 + 4 * (h - 1)] == '1' then
        A.release(KEYS[h], ARGV[mbase + h - 1])
      end
    end
    for h = 1, nhits do
      local first = h
      for j = 1, h - 1 do
        if KEYS[j] == KEYS[h] then first = j break end
      end
      local A = HIT[(h - 1) * 12 + 1]
      -- a distinct value is not given back (ARCHITECTURE.md "distinct")
      if ARGV[a0 + 4 * (h - 1)] == '1' and not A.lease and not A.distinct then
        total[first] = (total[first] or 0) + HIT[(h - 1) * 12 + 3]
      end
    end
    for h = 1, nhits do
      local c = total[h]
      local cur = c and redis.call('GET', KEYS[h])
      if cur then
        local a, b = a0 + 4 * (h - 1), (h - 1) * 12
        local A, ps = HIT[b + 1], HIT[b + 4]
        local old
        if ARGV[a + 2] == '1' then old = ARGV[a + 3] end
        if cur == ARGV[a + 1] then
          -- Unchanged since the count: its previous value is the exact inverse.
          if old == nil then
            redis.call('DEL', KEYS[h])
          else
            store(KEYS[h], A, decode(A, old, ps), ps, old)
          end
        else
          now = took
          local before, after = decode(A, old, ps), decode(A, old, ps)
          for w = 1, #ps do A.take(after[w], ps[w], c) end
          now = check
          local states = decode(A, cur, ps)
          for w = 1, #ps do A.giveback(states[w], before[w], after[w], ps[w], c, took, at) end
          store(KEYS[h], A, states, ps)
        end
      end
    end
  end

  -- Pass 1: check every hit. Hits on the same key share one state; a later
  -- one is checked at its cost plus the costs the earlier ones would take.
  local allowed = true
  for h = 1, nhits do
    local b = (h - 1) * 12
    local A, ps, cost = HIT[b + 1], HIT[b + 4], HIT[b + 3]
    local first
    for j = 1, h - 1 do
      if KEYS[j] == KEYS[h] then first = j break end
    end
    local states
    if first then
      local fb = (first - 1) * 12
      HIT[b + 5], states, HIT[b + 7] = HIT[fb + 5], HIT[fb + 6], first
      for j = first, h - 1 do
        local jb = (j - 1) * 12
        if KEYS[j] == KEYS[h] and (not HIT[jb + 2] or HIT[jb + 8]) then cost = cost + HIT[jb + 3] end
      end
    elseif A.lease then
      states = { { A.read(KEYS[h], mode == 0) } }
    elseif A.distinct then
      states = { A.read(KEYS[h], ps[1]) }
    else
      local raw = redis.call('GET', KEYS[h])
      if raw == false then raw = nil end
      HIT[b + 5] = raw
      states = decode(A, raw, ps)
    end
    HIT[b + 6] = states
    local ok, never = true, 0
    if A.distinct then
      -- a value counts once, whatever the request's cost
      A.value(states[1], KEYS[h], DV[h], ps[1])
    else
      for w = #ps, 1, -1 do
        if cost > ps[w][3] then never = w end
      end
    end
    local wi = #WR
    HIT[b + 10] = wi
    local left = PEN and PEN[h] and PEN[h].left
    if HM and HM[h] == 2 then
      -- take: counted without a check, past the limit if need be
      never = 0
      for w = 1, #ps do WR[wi + 2 * w - 1], WR[wi + 2 * w] = true, 0 end
    elseif left then
      -- In the penalty box: denied for the time left, nothing checked.
      ok, never = false, -1
      for w = 1, #ps do
        WR[wi + 2 * w - 1], WR[wi + 2 * w] = false, w == 1 and left or 0
      end
    elseif never > 0 then
      ok = false
    else
      for w = 1, #ps do
        local o, ra = A.allow(states[w], ps[w], cost)
        WR[wi + 2 * w - 1], WR[wi + 2 * w] = o, ra
        if not o then ok = false end
      end
      if not ok and HD and HD[h] and not HIT[b + 2] and not (HM and HM[h] == 3) then
        local d = reserve(WR, wi, #ps, HD[h])
        if d then
          ok, DL = true, DL or {}
          DL[h] = d
        end
      end
    end
    HIT[b + 8], HIT[b + 9] = ok, never
    if not ok and not HIT[b + 2] then allowed = false end
  end
  if PEN and mode ~= 2 then fillboxes(HIT) end

  -- Pass 2: count, only if every enforced hit allows, and report each hit
  -- right after its own count.
  local out = { allowed and 1 or 0, now }
  local n = 2
  for h = 1, nhits do
    local b = (h - 1) * 12
    local A, ps, states, first = HIT[b + 1], HIT[b + 4], HIT[b + 6], HIT[b + 7]
    local counted = mode == 0 and allowed and HIT[b + 8] and not (HM and HM[h] == 1)
    if counted then
      local t = now
      if DL and DL[h] then now = now + DL[h] end -- a reservation counts at its slot
      -- (pass 1 left the state bound to the last value checked on it)
      if A.distinct then A.value(states[1], KEYS[h], DV[h], ps[1]) end
      for w = 1, #ps do A.take(states[w], ps[w], HIT[b + 3]) end
      if now ~= t then
        now = t
        MK = MK or {}
        MK[h] = A.mark(states[1])
      end
      HIT[((first or h) - 1) * 12 + 11] = true
      if A.lease then A.hold(KEYS[h], ARGV[mbase + h - 1]) end
    end
    out[n + 1] = counted and 1 or 0
    out[n + 2] = HIT[b + 9]
    out[n + 3] = (not first and HIT[b + 5]) and 1 or 0
    n = n + 3
    local wi, never = HIT[b + 10], HIT[b + 9] > 0
    for w = 1, #ps do
      local s, p = states[w], ps[w]
      if never then
        out[n + 1], out[n + 2] = 0, 0
      else
        out[n + 1], out[n + 2] = WR[wi + 2 * w - 1] and 1 or 0, WR[wi + 2 * w]
      end
      local r = A.remaining(s, p)
      out[n + 3] = r
      if A.distinct then
        out[n + 4] = A.reset(s, p)
      else
        out[n + 4] = reset(A, s, p, r)
      end
      n = n + 4
    end
  end

  -- Write every changed key once, with a TTL just past its state's expiry;
  -- heal an unchanged key that lost its TTL (nothing here may live forever).
  for h = 1, nhits do
    local b = (h - 1) * 12
    local raw = HIT[b + 5]
    HIT[b + 12] = raw
    if not HIT[b + 7] then
      local A, ps, states = HIT[b + 1], HIT[b + 4], HIT[b + 6]
      if A.distinct then
        A.write(KEYS[h], states[1], ps[1], HIT[b + 11])
      elseif A.lease then
        if HIT[b + 11] then
          -- The key outlives every lease in it; each lease ends by itself.
          A.write(KEYS[h], states[1][1])
          redis.call('PEXPIRE', KEYS[h], lease + margin)
        end
      elseif HIT[b + 11] then
        local t = ttl(A, states, ps)
        if t == false then
          redis.call('DEL', KEYS[h])
          HIT[b + 12] = nil
        else
          local v = encode(A, states, ps)
          HIT[b + 12] = v
          redis.call('SET', KEYS[h], v, 'PX', px(t or lease))
        end
      elseif raw ~= nil and redis.call('PTTL', KEYS[h]) == -1 then
        local t = ttl(A, states, ps)
        if t == false then redis.call('DEL', KEYS[h]) else redis.call('PEXPIRE', KEYS[h], px(t or lease)) end
      end
    end
  end

  if DL then n = appenddelays(out, n, DL, MK) end

  local reply
  if n == 9 then -- one hit, one window
    reply = spack('<ddddddddd', tunpack(out, 1, 9))
  else
    reply = spack('<' .. string.rep('d', n), tunpack(out, 1, n))
  end
  if wantold == 0 then return reply end
  local full = { reply }
  for h = 1, nhits do
    local b = (h - 1) * 12
    if HIT[b + 7] then
      full[2 * h], full[2 * h + 1] = '', ''
    else
      full[2 * h], full[2 * h + 1] = HIT[b + 5] or '', HIT[b + 12] or ''
    end
  end
  return full
end
