---------------------------------------------------------------- sliding_window_log
-- A packed binary log per window, oldest first, one entry per tick that
-- counted: a 7-byte base timestamp (the oldest entry's), then per entry a
-- 6-byte offset from it and a 2-byte unit count 1..65534, or 65535
-- followed by the count in 7 bytes (as wide as any cost: a request adds at
-- most one entry whatever its cost). Stored per window behind a 4-byte
-- length. s = { ts = {}, cnt = {} } unpacked.
DEF[3] = function()
  local BIG = 65535 -- run field marking a run whose count follows in 7 bytes
  local MAXOFF = 281474976710655 -- 2^48 − 1
  local function logparse(blob)
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
  local function logcut(s, cut)
    local first, gone, total = #s.ts + 1, 0, 0
    for k = 1, #s.ts do
      if first > #s.ts and s.ts[k] > cut then first = k end
      if first > k then gone = gone + s.cnt[k] end
      total = total + s.cnt[k]
    end
    return first, gone, total
  end
  local function logencode(s)
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
  return {
    init = function() return { ts = {}, cnt = {} } end,
    allow = function(s, p, cost)
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
    end,
    take = function(s, p, cost)
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
    end,
    remaining = function(s, p)
      local _, gone, total = logcut(s, now - p[2])
      return clamp(p[1] - (total - gone), 0, p[3])
    end,
    expiry = function(s, p)
      if #s.ts == 0 then return false end
      return s.ts[#s.ts] + p[2]
    end,
    giveback = function(s, o, a, p, c)
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
    end,
    decode = function(raw, ps)
      local states, pos = {}, 1
      for w = 1, #ps do
        if pos + 3 > #raw then error('tollgate: corrupt log state') end
        local len = sunpack('>I4', raw, pos)
        states[w] = logparse(string.sub(raw, pos + 4, pos + 3 + len))
        pos = pos + 4 + len
      end
      return states
    end,
    encode = function(states)
      local out = {}
      for w = 1, #states do
        local blob = logencode(states[w])
        out[w] = spack('>I4', #blob) .. blob
      end
      return table.concat(out)
    end,
  }
end
