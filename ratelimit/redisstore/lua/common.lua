-- Tollgate: decide every hit of one request at once (ARCHITECTURE.md
-- "Algorithm math", mirrored from the Go window types bit for bit: integer
-- ticks in µs, doubles in the order written).
--
-- The script is assembled from the pieces in this directory, concatenated
-- into one chunk: common.lua (this file) first, then every other piece in
-- name order, driver.lua last. A piece sees the locals of the pieces
-- before it. An algorithm's piece registers a constructor in DEF under its
-- number (ratelimit.Algorithm) returning the algorithm's handler table:
--
--   init(p)                       fresh state of one window
--   allow(s, p, cost)             ok, retry ticks (0 when ok)
--   take(s, p, cost)              count cost in s
--   remaining(s, p)               units left, clamped to [0, capacity]
--   expiry(s, p)                  instant s is fresh again; nil = forever
--                                 while held (a lease), false = fresh now
--   nfields(p)                    doubles of one window's packed state
--   giveback(s, o, a, p, c, took, at)  undo a count (refunds, below)
--   decode(raw, ps), encode(states, ps)  optional: a state that is not
--                                 nfields doubles per window
--   lease, read, write, hold, release  concurrency only (sorted set)
--   mark(s), cancel(s, p, c, mark)  delayable ones (modes.lua); cancel also
--                 on fixed_window and sliding_counter: mark = the instant
--                 the units were counted (a hybrid lease's give-back)
--   one(shadow, L, W, C, P, N)    optional: the whole call of one ordinary
--                 hit on a one-window limit (read, decide, write, reply,
--                 as the driver's general path would, or the short reply
--                 below), made once per limit
--                 and kept by a Function library (driver.lua); it may keep
--                 a key's TTL where the general path would set the same
--                 instant again (only what changed is written)
--
-- The driver builds a handler table only for the algorithms a call uses:
-- with EVALSHA Redis runs this whole chunk on every call (a Function
-- library runs it once, when loaded, and keeps the tables), and in its
-- Lua every closure, table, C function call (math.*, tonumber, tostring)
-- and ARGV string costs hundreds of instructions. So numbers travel as
-- little-endian doubles packed with struct (no decimal parsing or
-- formatting), and the reply is one packed string.
--
-- KEYS[h]   state of hit h (one key per hit; every window of the limit in it),
--           then the penalty box of every hit whose limit has one
-- ARGV[1]   header, doubles: now (ticks), use TIME (0/1), mode, want-old
--           (0/1), lease TTL ms, TTL margin ms, H; then the cost of each hit
--           mode: 0 decide (count only if every enforced hit allows),
--                 1 check only (never count),
--                 2 refund: give back what an earlier mode-0 call counted
--                   (ARCHITECTURE.md "Cluster refunds"), then check only
--                 3 cancel: give back delayed hits' reservations, or
--                   batched hits' unused lease units (modes.lua)
--                 4 settle: give back reserved units a request did not
--                   use (settle.lua)
--           then, when any hit is not an ordinary count, the mode of each
--           hit: 0 count, 1 peek (check, never count), 2 take (count
--           without a check), 3 count but never reserve a slot (no wait)
-- One hit on a limit with a one-hit decider (one, below), counted or
-- checked, without old values: ARGV[1] is instead the short header,
--           doubles: now (ticks), cost, mode + 2 * use TIME, TTL margin ms
--           (32 bytes; one hit, no want-old, no lease implied)
-- Two to four ordinary hits, each on a one-window fixed_window limit, on
-- distinct keys, counted or checked, without old values (fixedn in
-- fixed_window.lua): ARGV[1] is instead the fixed-window header, doubles:
--           now (ticks), mode + 2 * use TIME, TTL margin ms, then the cost
--           of each hit (40 to 56 bytes: shorter than every full header,
--           longer than the one-hit header)
-- ARGV[1+h] the limit of hit h, doubles: algorithm, shadow (0/1), windows n,
--           then per window L, W, capacity, P, N (built once per limit),
--           then, for a limit that delays, its max delay in ticks
-- refund mode then appends 1 string of doubles: the instant the mode-0 call
--           counted at (its reply's now) and the refund's instant (ignored
--           with TIME, which is read instead); then per hit 4 strings from
--           the mode-0 call: counted (0/1), value written, old-exists (0/1),
--           value read
-- then, when any hit is a concurrency hit, 1 string per hit: the member
--           (holder slot id) a concurrency hit takes or gives back, '' for
--           other hits
-- then, when any hit is a distinct hit, 1 string per hit: its value
--           (distinct.lua), '' for other hits
--
-- State: the doubles of every window, packed '<d' (bit-exact); the sliding
-- log keeps its packed binary log per window behind a 4-byte length.
-- Concurrency keeps a sorted set instead (concurrency.lua).
--
-- Reply: one string of doubles: allowed, now, per hit: counted, never
-- (first window whose capacity the cost exceeds, or 0), old-exists (0/1),
-- per window: ok, retry, remaining, reset; then per hit allowed by
-- waiting: its index, delay (ticks), mark. With want-old the reply is
-- { that string, per hit: old, new }. The one-hit deciders (generic1 in
-- driver.lua, and fixed_window's, gcra's, sliding_counter's and
-- token_bucket's own) each pack that reply for their one hit inline, the
-- same spack expression five times: a shared function would add a Lua
-- call, ~0.7k Redis instructions, to every denial (BENCHMARKS.md "One
-- helper for the 9-double reply, measured").
-- Short reply: a one-hit decider (one, below) answers a hit it allowed and
-- counted with the window's state alone, from which the gateway computes
-- remaining and reset (window.Report): fixed_window's count in now's
-- window as an integer (local clock) or '<dd' now, count (use TIME);
-- gcra's TAT as '<d' (the value it wrote) or '<dd' now, TAT;
-- token_bucket's '<dd' tokens, instant (the value it wrote) or '<ddd'
-- now, tokens, instant; sliding_window_counter's N+2 doubles newest,
-- counts (its whole state, as stored), now first with TIME, when that is
-- under 9 doubles. Every short reply is shorter than the full reply of
-- one hit (9 doubles), which tells the gateway which it got. Anything
-- else (a denial, a check, a state it cannot say so) gets the full reply.
-- The stored state is the same either way. A fixed-window header call
-- counted in every hit, each in now's window, is answered with the counts
-- alone: one double per hit (now first, with TIME), shorter than the
-- full reply of its hits (2 + 7H doubles).
-- A key of the wrong type or holding garbage raises a script error: the call
-- fails (a store error) and nothing is written.
--
-- Algorithms: 1 fixed_window, 2 fixed_window_elastic, 3 sliding_window_log,
-- 4 sliding_window_counter, 5 token_bucket, 6 gcra, 7 concurrency, 8 quota,
-- 9 distinct (distinct.lua: its own key layout and the hit's value).
-- params p = { L, W, capacity, P, N } (one window of a limit; a quota's
-- carries its periods' boundaries instead of W, P and N: quota.lua). A
-- limit with a penalty box appends the penalty to its parameters, and its
-- hits' boxes follow the hits in KEYS (penalty.lua).

local LIMIT = 2305843009213693951 -- math.MaxInt64 / 4, as ceilTicks saturates
-- ratelimit.MaxWait in ticks: the longest wait a decision reports; the
-- searches for the next admitting instant stop there (as Go's
-- smallestFrom does), and a state that admits nothing by then (a refill
-- longer than that, a corrupted state) is denied with this wait.
local MAXWAIT = 3162240000000000
-- Library functions, bound by the driver when a call starts: loading a
-- Function library may read no global but redis, so no piece reads a
-- global outside a function body. (rcall is redis.call: a global read
-- goes through the protected globals' metatable on every use; the
-- one-hit deciders call it through this local, as tonum is tonumber.
-- Both are bound only on the paths that use them: with EVALSHA every
-- call binds again, and the general path would pay for two reads.)
local floor, tunpack, spack, sunpack, rcall, tonum

-- The call's header values, set by the driver before anything reads them.
local now, usetime, mode, wantold, lease, margin, nhits
local leasenow -- TIME in ticks, read at most once per call (concurrency)

-- DEF[algorithm] builds that algorithm's handler table; ALG caches it.
local DEF, ALG = {}, {}

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

-- redistime is Redis's TIME in ticks. Lua parses the seconds string
-- with strtod, and it changes once a second: its value is kept with it.
local SEC, SECN
local function redistime()
  if not rcall then rcall, tonum = redis.call, tonumber end
  local t = rcall('TIME')
  local sec = t[1]
  if sec ~= SEC then SEC, SECN = sec, tonum(sec) * 1000000 end
  return SECN + tonum(t[2])
end

-- PXS[t] is the decimal string of a TTL of t ms: Redis formats a number
-- passed to redis.call with snprintf (thousands of instructions, more
-- than the command it is an argument of), and a limit's TTLs repeat. The
-- table is bounded: emptied when it holds 1024 strings. A TTL past 1e14
-- ms (only the saturated ones) is passed as the number itself.
local PXS, npxs = {}, 0
local function px(t)
  local v = PXS[t]
  if v then return v end
  if t >= 1e14 then return t end
  if npxs >= 1024 then PXS, npxs = {}, 0 end
  v = string.format('%d', t)
  PXS[t], npxs = v, npxs + 1
  return v
end
