-- Tollgate: decide every hit of one request at once (ARCHITECTURE.md
-- "Algorithm math", mirrored from the Go window types bit for bit: integer
-- ticks in µs, doubles in the order written, doubles stored with %.17g).
--
-- KEYS[h]  state of hit h (one key per hit; every window of the limit in it)
-- ARGV[1]  now in ticks, or "" to read redis.call('TIME')
-- ARGV[2]  mode: 0 decide (count only if every enforced hit allows),
--                1 check only (never count),
--                2 refund: restore values written by an earlier mode-0 call
--                  (compare-and-set), then check only
-- ARGV[3]  1 to return, per hit, the value before and after this call
-- ARGV[4]  lease TTL of concurrency keys in ms
-- ARGV[5]  TTL margin in ms added to every state's own expiry
-- ARGV[6]  number of hits H; then per hit: algorithm, shadow (0/1), cost,
--          number of windows n, and per window: L, W, capacity, P, N
-- refund mode then appends per hit: restore (0/1), written, old-exists (0/1), old
--
-- Reply: { allowed, now, per hit: counted, never (first window whose
--          capacity the cost exceeds, or 0), per window: ok, retry, remaining,
--          reset [, per hit: old-exists, old, new] }
-- A key of the wrong type or holding garbage raises a script error: the call
-- fails (a store error) and nothing is written.

local FW, ELASTIC, LOG, COUNTER, TB, GCRA, CONC = 1, 2, 3, 4, 5, 6, 7

local fmt = string.format
local floor, ceil, mmax, mmin = math.floor, math.ceil, math.max, math.min

local function num(x)
  local v = tonumber(x)
  if v == nil then error('tollgate: corrupt counter state') end
  return v
end

-- floor(a / b) exactly for integers a, b > 0 below 2^53.
local function floordiv(a, b)
  local q = floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1 elseif r >= b then q = q + 1 end
  return q
end

local function clamp(v, lo, hi) return mmin(mmax(v, lo), hi) end

local LIMIT = 2305843009213693951 -- math.MaxInt64 / 4, as ceilTicks saturates
local function ceilticks(x)
  if not (x < LIMIT) then return LIMIT end
  if x < 0 then return 0 end
  return ceil(x)
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local mode = tonumber(ARGV[2])
local wantold = ARGV[3] == '1'
local lease = tonumber(ARGV[4])
local margin = tonumber(ARGV[5])
local nhits = tonumber(ARGV[6])

---------------------------------------------------------------- algorithms
-- Each algorithm: parse(fields iterator / blob, p) -> state, init(p) -> state,
-- allow(s, p, cost) -> ok, retry; take(s, p, cost); remaining(s, p);
-- expiry(s, p) (nil = forever while held, false = fresh); encode(s, p).

local A = {}

A[FW] = {
  init = function(p) return { floordiv(now, p.W) * p.W, 0 } end,
  at = function(s, p)
    local start = floordiv(now, p.W) * p.W
    if start > s[1] then return start, 0 end
    return s[1], s[2]
  end,
}
A[FW].allow = function(s, p, c)
  local start, count = A[FW].at(s, p)
  if count + c <= p.L then return true, 0 end
  return false, start + p.W - now
end
A[FW].take = function(s, p, c)
  local start, count = A[FW].at(s, p)
  s[1], s[2] = start, count + c
end
A[FW].remaining = function(s, p)
  local _, count = A[FW].at(s, p)
  return clamp(p.L - count, 0, p.Cap)
end
A[FW].expiry = function(s, p) return s[1] + p.W end
A[FW].nf = 2

A[ELASTIC] = {
  nf = 2,
  init = function(p) return { now, 0 } end,
  count = function(s) if now >= s[1] then return 0 end return s[2] end,
}
A[ELASTIC].allow = function(s, p, c)
  if A[ELASTIC].count(s) + c <= p.L then return true, 0 end
  return false, s[1] - now
end
A[ELASTIC].take = function(s, p, c)
  s[2] = A[ELASTIC].count(s) + c
  s[1] = mmax(s[1], now + p.W)
end
A[ELASTIC].remaining = function(s, p) return clamp(p.L - A[ELASTIC].count(s), 0, p.Cap) end
A[ELASTIC].expiry = function(s, p) return s[1] end

A[TB] = { nf = 2, init = function(p) return { p.Cap, now } end }
local function tblevel(s, p, t)
  local elapsed = mmax(t - s[2], 0)
  return mmin(p.Cap, s[1] + elapsed * p.L / p.W)
end
A[TB].allow = function(s, p, cost)
  local t = tblevel(s, p, now)
  if t >= cost then return true, 0 end
  local d = mmax(s[2] - now, 0) + ceilticks((cost - t) * p.W / p.L)
  d = mmax(d, 1)
  local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
  while tblevel(s, p, now + d) < cost and guard < 100000 do d, guard = d + 1, guard + 1 end
  while d > 1 and tblevel(s, p, now + d - 1) >= cost do d = d - 1 end
  return false, d
end
A[TB].take = function(s, p, cost)
  s[1] = tblevel(s, p, now) - cost
  s[2] = mmax(s[2], now)
end
A[TB].remaining = function(s, p) return clamp(floor(tblevel(s, p, now)), 0, p.Cap) end
A[TB].expiry = function(s, p) return s[2] + ceilticks((p.Cap - s[1]) * p.W / p.L) + 1 end

A[GCRA] = { nf = 1, init = function(p) return { now } end }
local function gparams(p)
  local t = p.W / p.L
  return t, p.Cap * t
end
-- max(tat - now, 0) + c*T <= tau: see GCRAState.allowedAt in Go for why
-- it is not written as max(tat, now) + c*T - now.
local function gallowed(s, t, c, et, tau)
  return mmax(s[1] - t, 0) + c * et <= tau
end
A[GCRA].allow = function(s, p, cost)
  local et, tau = gparams(p)
  if gallowed(s, now, cost, et, tau) then return true, 0 end
  local tat = mmax(s[1], now) + cost * et
  local d = mmax(ceilticks(tat - tau - now), 1)
  local guard = 0 -- rounding can make an edge cost unreachable: stay bounded
  while not gallowed(s, now + d, cost, et, tau) and guard < 100000 do d, guard = d + 1, guard + 1 end
  while d > 1 and gallowed(s, now + d - 1, cost, et, tau) do d = d - 1 end
  return false, d
end
A[GCRA].take = function(s, p, cost)
  local et = gparams(p)
  s[1] = mmax(s[1], now) + cost * et
end
A[GCRA].remaining = function(s, p)
  local et, tau = gparams(p)
  return clamp(floor((tau - (mmax(s[1], now) - now)) / et), 0, p.Cap)
end
A[GCRA].expiry = function(s, p) return ceil(s[1]) end

A[CONC] = { nf = 1, init = function(p) return { 0 } end }
A[CONC].allow = function(s, p, cost) return s[1] + cost <= p.Cap, 0 end
A[CONC].take = function(s, p, cost) s[1] = s[1] + cost end
A[CONC].remaining = function(s, p) return clamp(p.Cap - s[1], 0, p.Cap) end
A[CONC].expiry = function(s, p)
  if s[1] > 0 then return nil end
  return false
end

-- sliding_window_counter: s = { newest, counts[0..N] } (ring, bucket j at j mod (N+1))
A[COUNTER] = {}
A[COUNTER].init = function(p)
  local s = { floordiv(now, p.P) }
  for k = 2, p.N + 2 do s[k] = 0 end
  return s
end
local function cbucket(s, p, j)
  if j > s[1] or j < s[1] - p.N then return 0 end
  return s[2 + (j - floordiv(j, p.N + 1) * (p.N + 1))]
end
local function cindex(s, p)
  local i = floordiv(now, p.P)
  if i < s[1] then return s[1], 0 end
  return i, now - i * p.P
end
local function csums(s, p, i)
  local full = 0
  for j = i - p.N + 1, i do full = full + cbucket(s, p, j) end
  return full, cbucket(s, p, i - p.N)
end
local function cest(p, full, partial, e)
  return full + partial * (p.P - e) / p.P
end
A[COUNTER].allow = function(s, p, cost)
  local i, e = cindex(s, p)
  local full, partial = csums(s, p, i)
  if cest(p, full, partial, e) + cost <= p.L then return true, 0 end
  local P = p.P
  for j = i, i + p.N + 1 do
    local start = 0
    if j == i then
      start = e
    else
      full = full + cbucket(s, p, j) - cbucket(s, p, j - p.N)
      partial = cbucket(s, p, j - p.N)
    end
    if full + cost <= p.L then
      local g = start
      if partial > 0 then
        local x = p.L - cost - full
        g = clamp(ceilticks(P - x * P / partial), start, P - 1)
      end
      while g < P and not (cest(p, full, partial, g) + cost <= p.L) do g = g + 1 end
      if g < P then
        while g > start and cest(p, full, partial, g - 1) + cost <= p.L do g = g - 1 end
        return false, j * P + g - now
      end
    end
  end
  return false, (i + p.N + 1) * P - now
end
A[COUNTER].take = function(s, p, cost)
  local i = cindex(s, p)
  local m = p.N + 1
  if i > s[1] then
    if i - s[1] > p.N then
      for k = 2, m + 1 do s[k] = 0 end
    else
      for j = s[1] + 1, i do s[2 + (j - floordiv(j, m) * m)] = 0 end
    end
    s[1] = i
  end
  local k = 2 + (i - floordiv(i, m) * m)
  s[k] = s[k] + cost
end
A[COUNTER].remaining = function(s, p)
  local i, e = cindex(s, p)
  local full, partial = csums(s, p, i)
  return clamp(p.L - ceilticks(cest(p, full, partial, e)), 0, p.Cap)
end
A[COUNTER].expiry = function(s, p) return (s[1] + p.N + 1) * p.P end

-- sliding_window_log: a packed binary log per window, oldest first:
-- 7-byte base timestamp, then 8-byte entries (6-byte offset from base,
-- 2-byte run length − 1). s = { base, n, ts = {}, cnt = {} } unpacked lazily.
local RUN = 65536
local MAXOFF = 281474976710655 -- 2^48 − 1
A[LOG] = {}
A[LOG].init = function(p) return { base = 0, ts = {}, cnt = {} } end
local function logparse(blob)
  local s = { base = 0, ts = {}, cnt = {} }
  if #blob == 0 then return s end
  if (#blob - 7) % 8 ~= 0 then error('tollgate: corrupt log state') end
  s.base = struct.unpack('>I7', blob)
  local k = 0
  for pos = 8, #blob, 8 do
    local off, run = struct.unpack('>I6>I2', blob, pos)
    k = k + 1
    s.ts[k] = s.base + off
    s.cnt[k] = run + 1
  end
  return s
end
-- first index whose timestamp is > cut (entries are sorted), and the units
-- held by the entries before it and in total.
local function logcut(s, cut)
  local first, gone, total = #s.ts + 1, 0, 0
  for k = 1, #s.ts do
    if first > #s.ts and s.ts[k] > cut then first = k end
    if first > k then gone = gone + s.cnt[k] end
    total = total + s.cnt[k]
  end
  return first, gone, total
end
A[LOG].allow = function(s, p, cost)
  local first, gone, total = logcut(s, now - p.W)
  local n = total - gone
  if n + cost <= p.L then return true, 0 end
  local k = n + cost - p.L
  local seen = 0
  for e = first, #s.ts do
    seen = seen + s.cnt[e]
    if seen >= k then return false, s.ts[e] + p.W - now end
  end
  return false, p.W
end
A[LOG].take = function(s, p, cost)
  local first = logcut(s, now - p.W)
  local ts, cnt = {}, {}
  for k = first, #s.ts do
    ts[#ts + 1] = s.ts[k]
    cnt[#cnt + 1] = s.cnt[k]
  end
  local at = now
  local last = #ts
  if last > 0 and ts[last] >= at then
    at = ts[last]
    if cnt[last] < RUN then
      local add = mmin(cost, RUN - cnt[last])
      cnt[last] = cnt[last] + add
      cost = cost - add
    end
  end
  while cost > 0 do
    local c = mmin(cost, RUN)
    ts[#ts + 1] = at
    cnt[#cnt + 1] = c
    cost = cost - c
  end
  s.ts, s.cnt = ts, cnt
end
A[LOG].remaining = function(s, p)
  local _, gone, total = logcut(s, now - p.W)
  return clamp(p.L - (total - gone), 0, p.Cap)
end
A[LOG].expiry = function(s, p)
  if #s.ts == 0 then return false end
  return s.ts[#s.ts] + p.W
end
local function logencode(s)
  if #s.ts == 0 then return '' end
  local base = s.base
  if #s.ts > 0 and (s.ts[1] < base or s.ts[#s.ts] - base > MAXOFF) then base = s.ts[1] end
  local parts = { struct.pack('>I7', base) }
  for k = 1, #s.ts do
    parts[k + 1] = struct.pack('>I6>I2', s.ts[k] - base, s.cnt[k] - 1)
  end
  return table.concat(parts)
end

---------------------------------------------------------------- state I/O

local function decode(alg, raw, params)
  local states = {}
  if alg == LOG then
    local pos = 1
    for w = 1, #params do
      if raw == nil then
        states[w] = A[LOG].init(params[w])
      else
        if pos + 3 > #raw then error('tollgate: corrupt log state') end
        local len = struct.unpack('>I4', raw, pos)
        states[w] = logparse(string.sub(raw, pos + 4, pos + 3 + len))
        pos = pos + 4 + len
      end
    end
    return states
  end
  if raw == nil then
    for w = 1, #params do states[w] = A[alg].init(params[w]) end
    return states
  end
  local f = {}
  for x in string.gmatch(raw, '[^,]+') do f[#f + 1] = num(x) end
  local pos = 1
  for w = 1, #params do
    local nf = A[alg].nf or (params[w].N + 2)
    if pos + nf - 1 > #f then error('tollgate: corrupt counter state') end
    local s = {}
    for k = 1, nf do s[k] = f[pos + k - 1] end
    states[w] = s
    pos = pos + nf
  end
  return states
end

local function encode(alg, states)
  local out = {}
  if alg == LOG then
    for w = 1, #states do
      local blob = logencode(states[w])
      out[w] = struct.pack('>I4', #blob) .. blob
    end
    return table.concat(out)
  end
  for w = 1, #states do
    for k = 1, #states[w] do out[#out + 1] = fmt('%.17g', states[w][k]) end
  end
  return table.concat(out, ',')
end

-- TTL in ms: until the latest window expiry, plus margin; nil = lease;
-- false = the state is fresh (delete the key).
local function ttl(alg, states, params)
  local exp
  for w = 1, #states do
    local e = A[alg].expiry(states[w], params[w])
    if e == nil then return nil end
    if e then exp = exp and mmax(exp, e) or e end
  end
  if not exp or exp <= now then return false end
  return ceil((exp - now) / 1000) + margin
end

local function reset(alg, s, p)
  local r = A[alg].remaining(s, p)
  if r >= p.Cap then return 0 end
  local ok, ra = A[alg].allow(s, p, r + 1)
  if ok then return 0 end
  return ra
end

---------------------------------------------------------------- main

local hits = {}
local a = 7
for h = 1, nhits do
  local hit = { alg = tonumber(ARGV[a]), shadow = ARGV[a + 1] == '1', cost = tonumber(ARGV[a + 2]), params = {} }
  local nw = tonumber(ARGV[a + 3])
  a = a + 4
  for w = 1, nw do
    hit.params[w] = { L = tonumber(ARGV[a]), W = tonumber(ARGV[a + 1]), Cap = tonumber(ARGV[a + 2]),
                      P = tonumber(ARGV[a + 3]), N = tonumber(ARGV[a + 4]) }
    a = a + 5
  end
  hits[h] = hit
end

if mode == 2 then
  for h = 1, nhits do
    if ARGV[a] == '1' then
      local cur = redis.call('GET', KEYS[h])
      if cur == ARGV[a + 1] then
        if ARGV[a + 2] == '1' then
          redis.call('SET', KEYS[h], ARGV[a + 3], 'KEEPTTL')
        else
          redis.call('DEL', KEYS[h])
        end
      end
    end
    a = a + 4
  end
end

-- Pass 1: check every hit. Hits on the same key share one state; a later
-- one is checked at its cost plus the costs the earlier ones would take.
local allowed = true
local owner = {}
for h = 1, nhits do
  local hit = hits[h]
  local cost = hit.cost
  local first = owner[KEYS[h]]
  if first then
    hit.raw, hit.states, hit.first = hits[first].raw, hits[first].states, first
    for j = first, h - 1 do
      if KEYS[j] == KEYS[h] and (not hits[j].shadow or hits[j].ok) then cost = cost + hits[j].cost end
    end
  else
    owner[KEYS[h]] = h
    hit.raw = redis.call('GET', KEYS[h])
    if hit.raw == false then hit.raw = nil end
    hit.states = decode(hit.alg, hit.raw, hit.params)
  end
  hit.ok, hit.wok, hit.wra = true, {}, {}
  hit.never = 0
  for w = #hit.params, 1, -1 do
    if cost > hit.params[w].Cap then hit.never = w end
  end
  if hit.never > 0 then
    hit.ok = false
  else
    for w = 1, #hit.params do
      local ok, ra = A[hit.alg].allow(hit.states[w], hit.params[w], cost)
      hit.wok[w], hit.wra[w] = ok, ra
      if not ok then hit.ok = false end
    end
  end
  if not hit.ok and not hit.shadow then allowed = false end
end

-- Pass 2: count, only if every enforced hit allows, and report each hit
-- right after its own count.
local out = { allowed and 1 or 0, now }
for h = 1, nhits do
  local hit = hits[h]
  local counted = mode == 0 and allowed and hit.ok
  if counted then
    for w = 1, #hit.params do A[hit.alg].take(hit.states[w], hit.params[w], hit.cost) end
    hits[hit.first or h].dirty = true
  end
  out[#out + 1] = counted and 1 or 0
  out[#out + 1] = hit.never
  for w = 1, #hit.params do
    local s, p = hit.states[w], hit.params[w]
    out[#out + 1] = hit.wok[w] and 1 or 0
    out[#out + 1] = hit.wra[w] or 0
    out[#out + 1] = A[hit.alg].remaining(s, p)
    out[#out + 1] = reset(hit.alg, s, p)
  end
end

-- Write every changed key once, with a TTL just past its state's expiry;
-- heal an unchanged key that lost its TTL (nothing here may live forever).
for h = 1, nhits do
  local hit = hits[h]
  hit.written = hit.raw
  if not hit.first then
    if hit.dirty then
      local t = ttl(hit.alg, hit.states, hit.params)
      if t == false then
        redis.call('DEL', KEYS[h])
        hit.written = nil
      else
        hit.written = encode(hit.alg, hit.states)
        redis.call('SET', KEYS[h], hit.written, 'PX', t or lease)
      end
    elseif hit.raw ~= nil and redis.call('PTTL', KEYS[h]) == -1 then
      local t = ttl(hit.alg, hit.states, hit.params)
      if t == false then redis.call('DEL', KEYS[h]) else redis.call('PEXPIRE', KEYS[h], t or lease) end
    end
  end
end
if wantold then
  for h = 1, nhits do
    local hit = hits[h]
    if hit.first then
      out[#out + 1] = 0
      out[#out + 1] = ''
      out[#out + 1] = ''
    else
      out[#out + 1] = hit.raw and 1 or 0
      out[#out + 1] = hit.raw or ''
      out[#out + 1] = hit.written or ''
    end
  end
end
return out
