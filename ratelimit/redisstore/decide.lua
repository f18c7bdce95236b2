-- Tollgate: decide every hit of one request at once (ARCHITECTURE.md
-- "Algorithm math", mirrored from the Go window types bit for bit: integer
-- ticks in µs, doubles in the order written).
--
-- Written for cost: Redis runs this whole chunk on every call, and in its
-- Lua every closure, table, C function call (math.*, tonumber, tostring)
-- and ARGV string costs hundreds of instructions. So numbers travel as
-- little-endian doubles packed with struct (no decimal parsing or
-- formatting), helpers are plain functions defined only for the algorithms
-- the call uses, and the reply is one packed string.
--
-- KEYS[h]   state of hit h (one key per hit; every window of the limit in it)
-- ARGV[1]   header, doubles: now (ticks), use TIME (0/1), mode, want-old
--           (0/1), lease TTL ms, TTL margin ms, H; then the cost of each hit
--           mode: 0 decide (count only if every enforced hit allows),
--                 1 check only (never count),
--                 2 refund: give back what an earlier mode-0 call counted
--                   (ARCHITECTURE.md "Cluster refunds"), then check only
-- ARGV[1+h] the limit of hit h, doubles: algorithm, shadow (0/1), windows n,
--           then per window L, W, capacity, P, N (built once per limit)
-- refund mode then appends 1 string of doubles: the instant the mode-0 call
--           counted at (its reply's now) and the refund's instant (ignored
--           with TIME, which is read instead); then per hit 4 strings from
--           the mode-0 call: counted (0/1), value written, old-exists (0/1),
--           value read
-- then, when any hit is a concurrency hit, 1 string per hit: the member
--           (holder slot id) a concurrency hit takes or gives back, '' for
--           other hits
--
-- State: the doubles of every window, packed '<d' (bit-exact); the sliding
-- log keeps its packed binary log per window behind a 4-byte length.
-- Concurrency keeps a sorted set instead (see "concurrency leases" below).
--
-- Reply: one string of doubles: allowed, now, per hit: counted, never
-- (first window whose capacity the cost exceeds, or 0), old-exists (0/1),
-- per window: ok, retry, remaining, reset. With want-old the reply is
-- { that string, per hit: old, new }.
-- A key of the wrong type or holding garbage raises a script error: the call
-- fails (a store error) and nothing is written.

-- Algorithms are compared as literals (an upvalue costs each closure):
-- 1 fixed_window, 2 fixed_window_elastic, 3 sliding_window_log,
-- 4 sliding_window_counter, 5 token_bucket, 6 gcra, 7 concurrency.
local LIMIT = 2305843009213693951 -- math.MaxInt64 / 4, as ceilTicks saturates
local floor = math.floor
local unpack, spack, sunpack = unpack, struct.pack, struct.unpack

local hdr = ARGV[1]
local now, usetime, mode, wantold, lease, margin, nhits, hpos = sunpack('<ddddddd', hdr)
-- the first member argument (after the limits and a refund's arguments)
local mbase = 2 + nhits
if mode == 2 then mbase = mbase + 1 + 4 * nhits end
if usetime == 1 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- floor(a / b) exactly for integers a, b > 0 below 2^53.
local function floordiv(a, b)
  local r = a % b
  if r < 0 then r = r + b elseif r >= b then r = r - b end
  return (a - r) / b
end

-- ceil(x) for x >= 0, saturating like Go's ceilTicks.
local function ceilticks(x)
  if not (x < LIMIT) then return LIMIT end
  if x < 0 then return 0 end
  local f = x % 1
  if f > 0 then return x - f + 1 end
  return x
end

local function clamp(v, lo, hi)
  if v < lo then v = lo end
  if hi < v then v = hi end
  return v
end

-- params p = { L, W, capacity, P, N }

---------------------------------------------------------------- per family
-- Assigned in main only when a hit of that family is decided.

local tblevel, gallowed -- token bucket, gcra
local cbucket, cindex, csums, cest -- sliding_window_counter
local logparse, logcut, logencode -- sliding_window_log
local BIG = 65535 -- run field marking a run whose count follows in 7 bytes
local MAXOFF = 281474976710655 -- 2^48 − 1


-- max(tat - now, 0) + c*T <= tau: see GCRAState.allowedAt in Go for why
-- it is not written as max(tat, now) + c*T - now.

-- sliding_window_counter: s = { newest, counts[0..N] } (ring, bucket j at j mod (N+1))

-- sliding_window_log: a packed binary log per window, oldest first, one
-- entry per tick that counted: a 7-byte base timestamp (the oldest entry's),
-- then per entry a 6-byte offset from it and a 2-byte unit count 1..65534,
-- or 65535 followed by the count in 7 bytes (as wide as any cost: a request
-- adds at most one entry whatever its cost). s = { ts = {}, cnt = {} }
-- unpacked.

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

local leasenow -- TIME in ticks, read at most once per call
local function ltime()
  if not leasenow then
    if usetime == 1 then
      leasenow = now
    else
      local t = redis.call('TIME')
      leasenow = tonumber(t[1]) * 1000000 + tonumber(t[2])
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

---------------------------------------------------------------- algorithms

local function init(alg, p)
  if alg == 1 then return { floordiv(now, p[2]) * p[2], 0 } end
  if alg == 2 then return { now, 0 } end
  if alg == 5 then return { p[3], now } end
  if alg == 6 then return { now } end
  if alg == 7 then return { 0 } end
  if alg == 3 then return { ts = {}, cnt = {} } end
  local s = { floordiv(now, p[4]) }
  for k = 2, p[5] + 2 do s[k] = 0 end
  return s
end

-- fixed_window: the window start and count in effect at now.
local function fwat(s, p)
  local start = floordiv(now, p[2]) * p[2]
  if start > s[1] then return start, 0 end
  return s[1], s[2]
end

local function allow(alg, s, p, cost)
  if alg == 1 then
    local start, count = fwat(s, p)
    if count + cost <= p[1] then return true, 0 end
    return false, start + p[2] - now
  elseif alg == 2 then
    local count = s[2]
    if now >= s[1] then count = 0 end
    if count + cost <= p[1] then return true, 0 end
    return false, s[1] - now
  elseif alg == 5 then
    local t = tblevel(s, p, now)
    if t >= cost then return true, 0 end
    local d = s[2] - now
    if d < 0 then d = 0 end
    d = d + ceilticks((cost - t) * p[2] / p[1])
    if d < 1 then d = 1 end
    local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
    while tblevel(s, p, now + d) < cost and guard < 100000 do d, guard = d + 1, guard + 1 end
    while d > 1 and tblevel(s, p, now + d - 1) >= cost do d = d - 1 end
    return false, d
  elseif alg == 6 then
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
  elseif alg == 7 then
    return s[1] + cost <= p[3], 0
  elseif alg == 3 then
    local first, gone, total = logcut(s, now - p[2])
    local n = total - gone
    if n + cost <= p[1] then return true, 0 end
    local k = n + cost - p[1]
    local seen = 0
    for e = first, #s.ts do
      seen = seen + s.cnt[e]
      if seen >= k then return false, s.ts[e] + p[2] - now end
    end
    return false, p[2]
  end
  -- COUNTER
  local i, e = cindex(s, p)
  local full, partial = csums(s, p, i)
  if cest(p, full, partial, e) + cost <= p[1] then return true, 0 end
  local P, N = p[4], p[5]
  for j = i, i + N + 1 do
    local start = 0
    if j == i then
      start = e
    else
      full = full + cbucket(s, p, j) - cbucket(s, p, j - N)
      partial = cbucket(s, p, j - N)
    end
    if full + cost <= p[1] then
      local g = start
      if partial > 0 then
        local x = p[1] - cost - full
        g = clamp(ceilticks(P - x * P / partial), start, P - 1)
      end
      while g < P and not (cest(p, full, partial, g) + cost <= p[1]) do g = g + 1 end
      if g < P then
        while g > start and cest(p, full, partial, g - 1) + cost <= p[1] do g = g - 1 end
        return false, j * P + g - now
      end
    end
  end
  return false, (i + N + 1) * P - now
end

local function take(alg, s, p, cost)
  if alg == 1 then
    local start, count = fwat(s, p)
    s[1], s[2] = start, count + cost
  elseif alg == 2 then
    local count = s[2]
    if now >= s[1] then count = 0 end
    s[2] = count + cost
    if s[1] < now + p[2] then s[1] = now + p[2] end
  elseif alg == 5 then
    s[1] = tblevel(s, p, now) - cost
    if s[2] < now then s[2] = now end
  elseif alg == 6 then
    local tat = s[1]
    if tat < now then tat = now end
    s[1] = tat + cost * (p[2] / p[1])
  elseif alg == 7 then
    s[1] = s[1] + cost
  elseif alg == 3 then
    local first = logcut(s, now - p[2])
    local ts, cnt = {}, {}
    for k = first, #s.ts do
      ts[#ts + 1] = s.ts[k]
      cnt[#cnt + 1] = s.cnt[k]
    end
    -- Logged at max(now, newest): units at the newest entry's tick join it.
    local last = #ts
    if last > 0 and ts[last] >= now then
      cnt[last] = cnt[last] + cost
    else
      ts[last + 1], cnt[last + 1] = now, cost
    end
    s.ts, s.cnt = ts, cnt
  else -- COUNTER
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
  end
end

local function remaining(alg, s, p)
  if alg == 1 then
    local _, count = fwat(s, p)
    return clamp(p[1] - count, 0, p[3])
  elseif alg == 2 then
    local count = s[2]
    if now >= s[1] then count = 0 end
    return clamp(p[1] - count, 0, p[3])
  elseif alg == 5 then
    return clamp(floor(tblevel(s, p, now)), 0, p[3])
  elseif alg == 6 then
    local et = p[2] / p[1]
    local tau = p[3] * et
    local tat = s[1]
    if tat < now then tat = now end
    return clamp(floor((tau - (tat - now)) / et), 0, p[3])
  elseif alg == 7 then
    return clamp(p[3] - s[1], 0, p[3])
  elseif alg == 3 then
    local _, gone, total = logcut(s, now - p[2])
    return clamp(p[1] - (total - gone), 0, p[3])
  end
  local i, e = cindex(s, p)
  local full, partial = csums(s, p, i)
  return clamp(p[1] - ceilticks(cest(p, full, partial, e)), 0, p[3])
end

-- expiry instant of one window's state: nil = forever while held (a
-- lease), false = the state is fresh.
local function expiry(alg, s, p)
  if alg == 1 then return s[1] + p[2] end
  if alg == 2 then return s[1] end
  if alg == 5 then return s[2] + ceilticks((p[3] - s[1]) * p[2] / p[1]) + 1 end
  if alg == 6 then return ceilticks(s[1]) end
  if alg == 7 then
    if s[1] > 0 then return nil end
    return false
  end
  if alg == 3 then
    if #s.ts == 0 then return false end
    return s.ts[#s.ts] + p[2]
  end
  return (s[1] + p[5] + 1) * p[4]
end

-- fields of one window's packed state (all but the log).
local function nfields(alg, p)
  if alg == 6 or alg == 7 then return 1 end
  if alg == 4 then return p[5] + 2 end
  return 2
end

---------------------------------------------------------------- state I/O

local function decode(alg, raw, ps)
  local states = {}
  if raw == nil then
    for w = 1, #ps do states[w] = init(alg, ps[w]) end
    return states
  end
  local pos = 1
  if alg == 3 then
    for w = 1, #ps do
      if pos + 3 > #raw then error('tollgate: corrupt log state') end
      local len = sunpack('>I4', raw, pos)
      states[w] = logparse(string.sub(raw, pos + 4, pos + 3 + len))
      pos = pos + 4 + len
    end
    return states
  end
  local need = 0
  for w = 1, #ps do need = need + nfields(alg, ps[w]) end
  if #raw ~= need * 8 then error('tollgate: corrupt counter state') end
  for w = 1, #ps do
    local nf = nfields(alg, ps[w])
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

local function encode(alg, states, ps)
  if alg == 3 then
    local out = {}
    for w = 1, #states do
      local blob = logencode(states[w])
      out[w] = spack('>I4', #blob) .. blob
    end
    return table.concat(out)
  end
  local out = ''
  for w = 1, #states do
    local s, nf = states[w], nfields(alg, ps[w])
    if nf == 1 then
      out = out .. spack('<d', s[1])
    elseif nf == 2 then
      out = out .. spack('<dd', s[1], s[2])
    else
      out = out .. spack('<' .. string.rep('d', nf), unpack(s, 1, nf))
    end
  end
  return out
end

-- TTL in ms: until the latest window expiry, plus margin; nil = lease;
-- false = the state is fresh (delete the key).
local function ttl(alg, states, ps)
  local exp
  for w = 1, #states do
    local e = expiry(alg, states[w], ps[w])
    if e == nil then return nil end
    if e and (not exp or e > exp) then exp = e end
  end
  if not exp or exp <= now then return false end
  return ceilticks((exp - now) / 1000) + margin
end

local function reset(alg, s, p)
  local r = remaining(alg, s, p)
  if r >= p[3] then return 0 end
  local ok, ra = allow(alg, s, p, r + 1)
  if ok then return 0 end
  return ra
end

-- giveback undoes, on window state s as it is now, a count of c units made
-- at instant took: o is the state before that count, a the state right
-- after it, at the refund's instant. It gives back the count's units even
-- if other requests changed s since, and never more than it took
-- (ARCHITECTURE.md "Cluster refunds").
local function giveback(alg, s, o, a, p, c, took, at)
  if alg == 1 then
    if s[1] == a[1] then s[2] = s[2] - c end
    if s[2] < 0 then s[2] = 0 end
  elseif alg == 2 then
    if s[1] == a[1] and s[2] == a[2] then
      s[1], s[2] = o[1], a[2] - c
    elseif s[1] < a[1] + p[2] then -- not a new box since
      s[2] = s[2] - c
      if s[2] < 0 then s[2] = 0 end
    end
  elseif alg == 3 then
    local t, left = a.ts[#a.ts], c
    for k = #s.ts, 1, -1 do
      if left <= 0 or s.ts[k] < t then break end
      if s.ts[k] == t then
        local d = s.cnt[k]
        if d > left then d = left end
        s.cnt[k], left = s.cnt[k] - d, left - d
      end
    end
    local ts, cnt = {}, {}
    for k = 1, #s.ts do
      if s.cnt[k] > 0 then ts[#ts + 1], cnt[#cnt + 1] = s.ts[k], s.cnt[k] end
    end
    s.ts, s.cnt = ts, cnt
  elseif alg == 4 then
    local i, N = a[1], p[5]
    if i <= s[1] and i >= s[1] - N then
      local k = 2 + (i - floordiv(i, N + 1) * (N + 1))
      s[k] = s[k] - c
      if s[k] < 0 then s[k] = 0 end
    end
  elseif alg == 5 then
    -- Nothing to give back once the bucket would have refilled to B by at
    -- even with the count (its c tokens would all have overflowed).
    local el = at - a[2]
    if el < 0 then el = 0 end
    if tblevel(o, p, took) + el * p[1] / p[2] - p[3] < c then
      s[1] = s[1] + c
      if s[1] > p[3] then s[1] = p[3] end
    end
  elseif alg == 6 then
    -- The count reserved [max(tat, took), a[1]); nothing to give back once
    -- at is past it (later counts may have started from their own now).
    local m = o[1]
    if m < took then m = took end
    -- (a[1] - m is exact: Sterbenz.) No floor at m: an earlier request in
    -- m may have been refunded since.
    if at < a[1] then s[1] = s[1] - (a[1] - m) end
  else
    s[1] = s[1] - c
    if s[1] < 0 then s[1] = 0 end
  end
end

-- store writes states to key k with a TTL just past their expiry (KEEPTTL
-- for a held lease), or deletes k when they are fresh.
local function store(k, alg, states, ps, v)
  local t = ttl(alg, states, ps)
  if t == false then
    redis.call('DEL', k)
  elseif t == nil then
    redis.call('SET', k, v or encode(alg, states, ps), 'KEEPTTL')
  else
    redis.call('SET', k, v or encode(alg, states, ps), 'PX', t)
  end
end

---------------------------------------------------------------- main

-- Per hit h, at b = (h-1)*12 in HIT: 1 algorithm, 2 shadow, 3 cost,
-- 4 params per window, 5 value read (nil if none), 6 states per window,
-- 7 earlier hit on the same key, 8 ok, 9 never, 10 offset of its windows'
-- (ok, retry) pairs in WR, 11 dirty, 12 value written. Flat tables: every
-- table costs an allocation.
local HIT, WR = {}, {}
local defined = 0 -- bit set of the families defined below
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
  HIT[b + 1], HIT[b + 2], HIT[b + 3], HIT[b + 4] = alg, shadow == 1, cost, ps
  if alg == 5 and defined % 2 < 1 then
    defined = defined + 1
    tblevel = function(s, p, t)
      local elapsed = t - s[2]
      if elapsed < 0 then elapsed = 0 end
      local v = s[1] + elapsed * p[1] / p[2]
      if v < p[3] then return v end
      return p[3]
    end
  elseif alg == 6 and defined % 4 < 2 then
    defined = defined + 2
    gallowed = function(s, t, c, et, tau)
      local d = s[1] - t
      if d < 0 then d = 0 end
      return d + c * et <= tau
    end
  elseif alg == 4 and defined % 8 < 4 then
    defined = defined + 4
    cbucket = function(s, p, j)
      if j > s[1] or j < s[1] - p[5] then return 0 end
      return s[2 + (j - floordiv(j, p[5] + 1) * (p[5] + 1))]
    end
    cindex = function(s, p)
      local i = floordiv(now, p[4])
      if i < s[1] then return s[1], 0 end
      return i, now - i * p[4]
    end
    csums = function(s, p, i)
      local full = 0
      for j = i - p[5] + 1, i do full = full + cbucket(s, p, j) end
      return full, cbucket(s, p, i - p[5])
    end
    cest = function(p, full, partial, e)
      return full + partial * (p[4] - e) / p[4]
    end
  elseif alg == 3 and defined % 16 < 8 then
    defined = defined + 8
    logparse = function(blob)
      local s = { ts = {}, cnt = {} }
      local n = #blob
      if n == 0 then return s end
      if n < 15 then error('tollgate: corrupt log state') end
      local base, pos = sunpack('>I7', blob)
      local k, off, cnt = 0, 0, 0
      while pos <= n do
        if pos + 7 > n then error('tollgate: corrupt log state') end
        off, cnt, pos = sunpack('>I6>I2', blob, pos)
        if cnt == BIG then
          if pos + 6 > n then error('tollgate: corrupt log state') end
          cnt, pos = sunpack('>I7', blob, pos)
          if cnt < 1 then error('tollgate: corrupt log state') end
        end
        k = k + 1
        s.ts[k], s.cnt[k] = base + off, cnt
      end
      return s
    end
    -- first index whose timestamp is > cut (entries are sorted), and the units
    -- held by the entries before it and in total.
    logcut = function(s, cut)
      local first, gone, total = #s.ts + 1, 0, 0
      for k = 1, #s.ts do
        if first > #s.ts and s.ts[k] > cut then first = k end
        if first > k then gone = gone + s.cnt[k] end
        total = total + s.cnt[k]
      end
      return first, gone, total
    end
    logencode = function(s)
      local ts, cnt, n = s.ts, s.cnt, #s.ts
      if n == 0 then return '' end
      -- Offsets span at most W plus how far a clock once ran ahead; a
      -- span beyond 2^48 ticks (8.9 years) drops the entries that far
      -- behind the newest.
      local first = 1
      while ts[n] - ts[first] > MAXOFF do first = first + 1 end
      local base = ts[first]
      local parts = { spack('>I7', base) }
      for k = first, n do
        if cnt[k] < BIG then
          parts[#parts + 1] = spack('>I6>I2', ts[k] - base, cnt[k])
        else
          parts[#parts + 1] = spack('>I6>I2>I7', ts[k] - base, BIG, cnt[k])
        end
      end
      return table.concat(parts)
    end
  end
end

-- Refund: per key, the units every counted hit on it took, given back.
if mode == 2 then
  local took, at = sunpack('<dd', ARGV[2 + nhits])
  if usetime == 1 then at = now end
  local check, a0, total = now, 3 + nhits, {}
  -- A concurrency slot is given back by its member: exact, whatever
  -- happened to the key since.
  for h = 1, nhits do
    if HIT[(h - 1) * 12 + 1] == 7 and ARGV[a0 + 4 * (h - 1)] == '1' then
      local k, m = KEYS[h], ARGV[mbase + h - 1]
      if redis.call('ZREM', k, m) == 1 then
        cwrite(k, cread(k, true) - sunpack('<d', m))
      end
    end
  end
  for h = 1, nhits do
    local first = h
    for j = 1, h - 1 do
      if KEYS[j] == KEYS[h] then first = j break end
    end
    if ARGV[a0 + 4 * (h - 1)] == '1' and HIT[(h - 1) * 12 + 1] ~= 7 then
      total[first] = (total[first] or 0) + HIT[(h - 1) * 12 + 3]
    end
  end
  for h = 1, nhits do
    local c = total[h]
    local cur = c and redis.call('GET', KEYS[h])
    if cur then
      local a, b = a0 + 4 * (h - 1), (h - 1) * 12
      local alg, ps = HIT[b + 1], HIT[b + 4]
      local old
      if ARGV[a + 2] == '1' then old = ARGV[a + 3] end
      if cur == ARGV[a + 1] then
        -- Unchanged since the count: its previous value is the exact inverse.
        if old == nil then
          redis.call('DEL', KEYS[h])
        else
          store(KEYS[h], alg, decode(alg, old, ps), ps, old)
        end
      else
        now = took
        local before, after = decode(alg, old, ps), decode(alg, old, ps)
        for w = 1, #ps do take(alg, after[w], ps[w], c) end
        now = check
        local states = decode(alg, cur, ps)
        for w = 1, #ps do giveback(alg, states[w], before[w], after[w], ps[w], c, took, at) end
        store(KEYS[h], alg, states, ps)
      end
    end
  end
end

-- Pass 1: check every hit. Hits on the same key share one state; a later
-- one is checked at its cost plus the costs the earlier ones would take.
local allowed = true
for h = 1, nhits do
  local b = (h - 1) * 12
  local alg, ps, cost = HIT[b + 1], HIT[b + 4], HIT[b + 3]
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
  elseif alg == 7 then
    states = { { cread(KEYS[h], mode == 0) } }
  else
    local raw = redis.call('GET', KEYS[h])
    if raw == false then raw = nil end
    HIT[b + 5] = raw
    states = decode(alg, raw, ps)
  end
  HIT[b + 6] = states
  local ok, never = true, 0
  for w = #ps, 1, -1 do
    if cost > ps[w][3] then never = w end
  end
  local wi = #WR
  HIT[b + 10] = wi
  if never > 0 then
    ok = false
  else
    for w = 1, #ps do
      local o, ra = allow(alg, states[w], ps[w], cost)
      WR[wi + 2 * w - 1], WR[wi + 2 * w] = o, ra
      if not o then ok = false end
    end
  end
  HIT[b + 8], HIT[b + 9] = ok, never
  if not ok and not HIT[b + 2] then allowed = false end
end

-- Pass 2: count, only if every enforced hit allows, and report each hit
-- right after its own count.
local out = { allowed and 1 or 0, now }
local n = 2
for h = 1, nhits do
  local b = (h - 1) * 12
  local alg, ps, states, first = HIT[b + 1], HIT[b + 4], HIT[b + 6], HIT[b + 7]
  local counted = mode == 0 and allowed and HIT[b + 8]
  if counted then
    for w = 1, #ps do take(alg, states[w], ps[w], HIT[b + 3]) end
    HIT[((first or h) - 1) * 12 + 11] = true
    if alg == 7 then
      redis.call('ZADD', KEYS[h], itoa(ltime() + lease * 1000), ARGV[mbase + h - 1])
    end
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
    out[n + 3] = remaining(alg, s, p)
    out[n + 4] = reset(alg, s, p)
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
    local alg, ps, states = HIT[b + 1], HIT[b + 4], HIT[b + 6]
    if alg == 7 then
      if HIT[b + 11] then
        -- The key outlives every lease in it; each lease ends by itself.
        cwrite(KEYS[h], states[1][1])
        redis.call('PEXPIRE', KEYS[h], lease + margin)
      end
    elseif HIT[b + 11] then
      local t = ttl(alg, states, ps)
      if t == false then
        redis.call('DEL', KEYS[h])
        HIT[b + 12] = nil
      else
        local v = encode(alg, states, ps)
        HIT[b + 12] = v
        redis.call('SET', KEYS[h], v, 'PX', t or lease)
      end
    elseif raw ~= nil and redis.call('PTTL', KEYS[h]) == -1 then
      local t = ttl(alg, states, ps)
      if t == false then redis.call('DEL', KEYS[h]) else redis.call('PEXPIRE', KEYS[h], t or lease) end
    end
  end
end

local reply
if n == 9 then -- one hit, one window
  reply = spack('<ddddddddd', unpack(out, 1, 9))
else
  reply = spack('<' .. string.rep('d', n), unpack(out, 1, n))
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
