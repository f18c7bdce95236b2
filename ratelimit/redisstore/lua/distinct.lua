---------------------------------------------------------------- distinct
-- A bound on the distinct values per key (ARCHITECTURE.md "distinct";
-- mirrored from window.DistinctState). The hit's value travels as 16
-- bytes: its 64-bit hash (8 bytes) and '<d' bit * 2^20 + register * 64 +
-- rank, which the gateway computes (ratelimit.DistinctRegister and
-- DistinctBit: Lua has no 64-bit integers). One key per hit, a string in one of two layouts:
--   exact:     'E', '<d' newest sub-window, then per value its 16 bytes
--              and '<d' the newest sub-window it was seen in (at most
--              DEXACT values)
--   estimated: 'H', '<d' newest, 52 '<d' histogram of the union's
--              registers, 16 '<d' non-zero registers per ring slot, the
--              union (DM bytes), then N ring slots of DM bytes (sub-window
--              j in slot j mod N; each byte a register), then N bitmaps
--              of DB bytes, slot j's membership bits (GETBIT order)
-- A counted value writes a few bytes with SETRANGE (estimated) or the
-- whole exact value; moving an estimated key to a later sub-window
-- clears the slots that left and rewrites the union where one of them
-- held its value (moveunion), written at once, also when nothing is
-- counted: it changes no decision.
-- s = { exact (bool), newest, vals, bks | histo, filled, u, rb, full,
--       val (16 bytes), reg, rank, i (now's sub-window), raw (bool) }
DEF[9] = function()
  local DEXACT, DM, DMAXRANK, DB = 128, 16384, 51, 16384
  local DHDR = 1 + 8 + 8 * (DMAXRANK + 1) + 8 * 16 -- 553
  local HFMT = '<' .. string.rep('d', DMAXRANK + 1)
  local FFMT = '<' .. string.rep('d', 16)
  local ZERO = string.rep('\0', DM)
  local Z256 = string.rep('\0', 256)
  local sbyte, schar, sfind = string.byte, string.char, string.find

  -- EFMT[n] unpacks n exact entries at once (one C call, not 2n).
  local EFMT = {}

  -- dexact returns the exact values and their sub-windows of raw.
  local function dexact(raw)
    local n = (#raw - 9) / 24
    if n ~= floor(n) or n > DEXACT then error('tollgate: corrupt distinct state') end
    local vals, bks = {}, {}
    if n == 0 then return vals, bks end
    local f = EFMT[n]
    if not f then
      f = '<' .. string.rep('c16d', n)
      EFMT[n] = f
    end
    local t = { sunpack(f, raw, 10) }
    for k = 1, n do
      vals[k], bks[k] = t[2 * k - 1], t[2 * k]
    end
    return vals, bks
  end

  -- est is the estimate of histogram h (window.Estimate, in its order).
  local function est(h)
    local m = DM
    local q = DMAXRANK - 1
    local z
    local x = (m - h[q + 2]) / m
    local tau = 0
    if x ~= 0 and x ~= 1 then
      local y, zz = 1.0, 1 - x
      while true do
        x = math.sqrt(x)
        local zp = zz
        y = y * 0.5
        local d = 1 - x
        zz = zz - d * d * y
        if zp == zz then break end
      end
      tau = zz / 3
    end
    z = m * tau
    for k = q, 1, -1 do
      z = z + h[k + 1]
      z = z * 0.5
    end
    local sx = h[1] / m
    local sigma
    if sx == 1 then
      sigma = 1 / 0
    else
      local y, zz = 1.0, sx
      while true do
        sx = sx * sx
        local zp = zz
        zz = zz + sx * y
        y = y + y
        if zp == zz then break end
      end
      sigma = zz
    end
    z = z + m * sigma
    local e = 0.721347520444481703680 * m * m / z
    local f = floor(e)
    if e - f >= 0.5 then f = f + 1 end
    return f
  end

  local function fresh(s, i)
    s.exact, s.newest, s.vals, s.bks = true, i, {}, {}
    s.histo, s.filled, s.ring, s.bm, s.U, s.full = nil, nil, nil, nil, nil, nil
  end

  local function encodehdr(s)
    return 'H' .. spack('<d', s.newest) .. spack(HFMT, tunpack(s.histo, 1, DMAXRANK + 1))
      .. spack(FFMT, tunpack(s.filled, 1, 16))
  end

  -- moveunion returns the union (nil when unchanged) and its histogram
  -- once the ring slots gone (1-based slot → its fill before the move;
  -- leaving, those of them holding a register) are cleared: window.DistinctHLL.recompute's
  -- result, computed where it can differ only. A register is a
  -- candidate where a leaving slot holds the union's value; it becomes
  -- the maximum of the slots kept there.
  local function moveunion(k, s, p, leaving, gone)
    local N = p[5]
    if redis.call('STRLEN', k) ~= DHDR + DM * (N + 1) + DB * N then error('tollgate: corrupt distinct state') end
    local U = redis.call('GETRANGE', k, DHDR, DHDR + DM - 1)
    local h = {}
    for q = 1, DMAXRANK + 1 do h[q] = s.histo[q] end
    -- the candidates, ascending: a slot's non-zero registers, found in C
    -- (a block of zeros is skipped by one comparison of interned strings)
    local cand, seen = {}, {}
    for _, sl in ipairs(leaving) do
      local r = redis.call('GETRANGE', k, DHDR + DM * sl, DHDR + DM * (sl + 1) - 1)
      local dense = gone[sl] * 4 > DM
      for o = 1, DM, 256 do
        local blk = r:sub(o, o + 255)
        if dense then
          -- most bytes non-zero: compare in tables, one C call a block
          local rb, ub = { sbyte(blk, 1, 256) }, { sbyte(U, o, o + 255) }
          for a = 1, 256 do
            local v = rb[a]
            if v > 0 and v == ub[a] and not seen[o + a - 1] then
              seen[o + a - 1] = true
              cand[#cand + 1] = o + a - 1
            end
          end
        elseif blk ~= Z256 then
          local a = sfind(blk, '[^%z]')
          while a do
            local g = o + a - 1
            if not seen[g] and sbyte(blk, a) == sbyte(U, g) then
              seen[g] = true
              cand[#cand + 1] = g
            end
            a = sfind(blk, '[^%z]', a + 1)
          end
        end
      end
    end
    if #cand == 0 then return nil, h end
    if #leaving > 1 then table.sort(cand) end
    local kept = {}
    for sl = 1, N do
      if not gone[sl] and s.filled[sl] > 0 then
        kept[#kept + 1] = redis.call('GETRANGE', k, DHDR + DM * sl, DHDR + DM * (sl + 1) - 1)
      end
    end
    -- each candidate's new value, the maximum of the kept slots there
    -- (their bytes read a 1024-register chunk at a time where many
    -- candidates share it); the union rebuilt around the changed bytes
    local parts, last, x = {}, 0, 1
    local kc, kco = nil, nil
    while cand[x] do
      local g = cand[x]
      local o = g - (g - 1) % 1024
      if kco ~= o then
        kc, kco = nil, o
        local e = x
        while cand[e] and cand[e] < o + 1024 do e = e + 1 end
        if e - x > 64 then
          kc = {}
          for y = 1, #kept do kc[y] = { sbyte(kept[y], o, o + 1023) } end
        end
      end
      local old, nv = sbyte(U, g), 0
      for y = 1, #kept do
        local b
        if kc then b = kc[y][g - o + 1] else b = sbyte(kept[y], g) end
        if b > nv then nv = b end
      end
      if nv ~= old then
        h[old + 1] = h[old + 1] - 1
        h[nv + 1] = h[nv + 1] + 1
        parts[#parts + 1] = U:sub(last + 1, g - 1)
        parts[#parts + 1] = schar(nv)
        last = g
      end
      x = x + 1
    end
    local changed = last > 0
    parts[#parts + 1] = U:sub(last + 1)
    if not changed then return nil, h end
    return table.concat(parts), h
  end

  -- read returns the state of key k at now, an estimated one moved to
  -- now's sub-window (written back at once).
  local function read(k, p)
    local P, N = p[4], p[5]
    local raw = redis.call('GETRANGE', k, 0, 8 + 24 * DEXACT)
    local s = { raw = #raw > 0, key = k }
    local fi = floordiv(now, P)
    if #raw == 0 then
      fresh(s, fi)
      s.i = fi
      return s
    end
    local tag = raw:sub(1, 1)
    s.newest = sunpack('<d', raw, 2)
    local i = fi
    if s.newest > i then i = s.newest end
    s.i = i
    if tag == 'E' then
      s.exact = true
      s.vals, s.bks = dexact(raw)
      return s
    end
    if tag ~= 'H' or #raw < DHDR then error('tollgate: corrupt distinct state') end
    s.exact = false
    s.histo = { sunpack(HFMT, raw, 10) }
    s.histo[DMAXRANK + 2] = nil
    s.filled = { sunpack(FFMT, raw, 10 + 8 * (DMAXRANK + 1)) }
    s.filled[17] = nil
    if i == s.newest then return s end
    -- Move to sub-window i: clear the slots that left, recompute.
    -- Every value has left: decide on a fresh state and leave the key
    -- to its TTL, as the memory store leaves a state past its expiry
    -- (a clock stepped back finds it again on both).
    if i - s.newest >= N then
      fresh(s, i)
      return s
    end
    -- Only the slots that leave and hold a register change anything:
    -- a register of the union falls only where a leaving slot holds
    -- its value; there it becomes the maximum of the slots kept. The
    -- rest of the value is untouched (a full recomputation here cost
    -- milliseconds of Redis's one thread per key and sub-window).
    local leaving, gone = {}, {}
    for j = s.newest + 1, i do
      local sl = (j % N) + 1
      gone[sl] = s.filled[sl] -- (0 is true in Lua)
      if s.filled[sl] > 0 then leaving[#leaving + 1] = sl end
      s.filled[sl] = 0
    end
    s.newest = i
    if #leaving > 0 then
      local U, h = moveunion(k, s, p, leaving, gone)
      if h[1] == DM then
        -- every value has left (as above)
        fresh(s, i)
        return s
      end
      for _, sl in ipairs(leaving) do
        redis.call('SETRANGE', k, DHDR + DM * sl, ZERO)
        redis.call('SETRANGE', k, DHDR + DM * (N + 1) + DB * (sl - 1), ZERO)
      end
      if U then redis.call('SETRANGE', k, DHDR, U) end
      s.histo = h
    end
    -- written back at once: the hit's own reads see the moved state
    redis.call('SETRANGE', k, 0, encodehdr(s))
    redis.call('PEXPIRE', k, px(ceilticks(((i + N) * P - now) / 1000) + margin))
    return s
  end

  -- value binds the hit's value to s (and, estimated, reads its union
  -- register and its register in now's slot).
  local function value(s, k, v, p)
    -- (Usage passes none: it reads remaining and reset only)
    if v == nil or #v ~= 16 then v = string.rep('\0', 16) end
    s.val = v
    local x = sunpack('<d', v, 9)
    s.bit = floor(x / 1048576)
    x = x - s.bit * 1048576
    s.reg, s.rank = floor(x / 64), x % 64
    if not s.exact then
      local slot = s.i % p[5]
      if s.full then
        s.u = sbyte(s.U, s.reg + 1)
        s.rb = sbyte(s.ring[slot + 1], s.reg + 1)
      else
        local b = redis.call('GETRANGE', k, DHDR + s.reg, DHDR + s.reg)
        s.u = sbyte(b, 1)
        b = redis.call('GETRANGE', k, DHDR + DM * (slot + 1) + s.reg, DHDR + DM * (slot + 1) + s.reg)
        s.rb = sbyte(b, 1)
      end
    end
  end

  -- find returns the index of s's value among the exact values, or nil.
  -- (The 16 bytes are a function of the hash: equal strings, equal
  -- values; Lua compares interned strings by pointer.)
  local function find(s)
    local v = s.val
    for k = 1, #s.vals do
      if s.vals[k] == v then return k end
    end
    return nil
  end

  local function live(s, p)
    local n, cut = 0, s.i - p[5]
    for k = 1, #s.bks do
      if s.bks[k] > cut then n = n + 1 end
    end
    return n
  end

  local function count(s, p)
    if s.exact then return live(s, p) end
    return est(s.histo)
  end

  -- oldest is the wait until the oldest sub-window holding a value
  -- leaves the window, 0 when none does.
  local function oldest(s, p)
    local P, N, i = p[4], p[5], s.i
    local o
    if s.exact then
      for k = 1, #s.bks do
        local b = s.bks[k]
        if b > i - N and (not o or b < o) then o = b end
      end
    else
      for j = i - N + 1, i do
        if s.filled[(j % N) + 1] > 0 then o = j break end
      end
    end
    if not o then return 0 end
    local w = (o + N) * P - now
    if w < 1 then w = 1 end
    return w
  end

  -- bitin reports whether bit b is set in the bitmap string bm.
  local function bitin(bm, b)
    local byte = sbyte(bm, floor(b / 8) + 1)
    return floor(byte / 2 ^ (7 - b % 8)) % 2 == 1
  end

  -- counted reports whether an estimated s holds its value: registers
  -- it would not raise and its bit set in a slot of the window.
  local function counted(s, p, k)
    if s.u < s.rank then return false end
    local N = p[5]
    for j = 0, N - 1 do
      if s.full then
        if bitin(s.bm[j + 1], s.bit) then return true end
      elseif redis.call('GETBIT', k, 8 * (DHDR + DM * (N + 1) + DB * j) + s.bit) == 1 then
        return true
      end
    end
    return false
  end

  local function allow(s, p)
    local L, P, N, i = p[1], p[4], p[5], s.i
    if s.exact then
      local k = find(s)
      if k and s.bks[k] > i - N then return true, 0 end
    elseif counted(s, p, s.key) then
      return true, 0
    end
    local c = count(s, p)
    if c + 1 <= L then return true, 0 end
    if not s.exact then return false, oldest(s, p) end
    local bs = {}
    for k = 1, #s.bks do
      if s.bks[k] > i - N then bs[#bs + 1] = s.bks[k] end
    end
    table.sort(bs)
    local k = c - L
    local w
    if k < 0 or k >= #bs then
      w = (i + 1) * P - now
    else
      w = (bs[k + 1] + N) * P - now
    end
    if w < 1 then w = 1 end
    return false, w
  end

  -- hadd sets (reg, rank) and bit in slot j of a full estimated state.
  local function hadd(s, reg, rank, bit, slot)
    local bm = s.bm[slot + 1]
    local bi = floor(bit / 8) + 1
    local byte = sbyte(bm, bi)
    local m = 2 ^ (7 - bit % 8)
    if floor(byte / m) % 2 == 0 then
      s.bm[slot + 1] = bm:sub(1, bi - 1) .. schar(byte + m) .. bm:sub(bi + 1)
    end
    local r = s.ring[slot + 1]
    local b = sbyte(r, reg + 1)
    if b == 0 then s.filled[slot + 1] = s.filled[slot + 1] + 1 end
    if rank > b then
      s.ring[slot + 1] = r:sub(1, reg) .. schar(rank) .. r:sub(reg + 2)
    end
    local u = sbyte(s.U, reg + 1)
    if rank > u then
      s.histo[u + 1] = s.histo[u + 1] - 1
      s.histo[rank + 1] = s.histo[rank + 1] + 1
      s.U = s.U:sub(1, reg) .. schar(rank) .. s.U:sub(reg + 2)
    end
  end

  local function take(s, p, k)
    local N, i = p[5], s.i
    s.newest = i
    s.dirty = true
    if not s.exact then
      local slot = i % N
      if s.full then
        hadd(s, s.reg, s.rank, s.bit, slot)
        return
      end
      redis.call('SETBIT', k, 8 * (DHDR + DM * (N + 1) + DB * slot) + s.bit, 1)
      -- a few bytes: the ring's and the union's now (a later hit on
      -- the key reads them), the header's in write
      if s.rb == 0 then s.filled[slot + 1] = s.filled[slot + 1] + 1 end
      if s.rank > s.rb then
        redis.call('SETRANGE', k, DHDR + DM * (slot + 1) + s.reg, schar(s.rank))
      end
      if s.rank > s.u then
        s.histo[s.u + 1] = s.histo[s.u + 1] - 1
        s.histo[s.rank + 1] = s.histo[s.rank + 1] + 1
        redis.call('SETRANGE', k, DHDR + s.reg, schar(s.rank))
      end
      return
    end
    local k = find(s)
    if k then
      s.bks[k] = i
      return
    end
    if #s.vals >= DEXACT then
      local v2, b2 = {}, {}
      for q = 1, #s.vals do
        if s.bks[q] > i - N then
          v2[#v2 + 1], b2[#b2 + 1] = s.vals[q], s.bks[q]
        end
      end
      s.vals, s.bks = v2, b2
    end
    if #s.vals < DEXACT then
      s.vals[#s.vals + 1], s.bks[#s.bks + 1] = s.val, i
      return
    end
    -- DEXACT live values and a new one: estimate them all from now on.
    s.exact, s.full = false, true
    local regs = {}
    for j = 1, N do regs[j] = {} end
    s.U = ZERO
    s.ring, s.bm = {}, {}
    for j = 1, N do s.ring[j], s.bm[j] = ZERO, ZERO end
    s.histo = {}
    for q = 1, DMAXRANK + 1 do s.histo[q] = 0 end
    s.histo[1] = DM
    s.filled = {}
    for j = 1, 16 do s.filled[j] = 0 end
    for q = 1, #s.vals do
      local x = sunpack('<d', s.vals[q], 9)
      local bit = floor(x / 1048576)
      x = x - bit * 1048576
      hadd(s, floor(x / 64), x % 64, bit, s.bks[q] % N)
    end
    s.vals, s.bks = nil, nil
    hadd(s, s.reg, s.rank, s.bit, i % N)
  end

  -- write stores what take changed (and heals a key without a TTL).
  local function write(k, s, p, counted)
    local exp = (s.newest + p[5]) * p[4]
    local t = ceilticks((exp - now) / 1000) + margin
    if s.full and not counted then
      -- read moved it: write it back as moved
      redis.call('SET', k, encodehdr(s) .. s.U .. table.concat(s.ring) .. table.concat(s.bm), 'PX', px(t))
      return
    end
    if not counted then
      if s.raw and redis.call('PTTL', k) == -1 then redis.call('PEXPIRE', k, px(t)) end
      return
    end
    if s.exact then
      local parts = { 'E', spack('<d', s.newest) }
      for q = 1, #s.vals do
        parts[#parts + 1] = s.vals[q]
        parts[#parts + 1] = spack('<d', s.bks[q])
      end
      redis.call('SET', k, table.concat(parts), 'PX', px(t))
    elseif s.full then
      redis.call('SET', k, encodehdr(s) .. s.U .. table.concat(s.ring) .. table.concat(s.bm), 'PX', px(t))
    else
      redis.call('SETRANGE', k, 0, encodehdr(s))
      redis.call('PEXPIRE', k, px(t))
    end
  end

  return {
    distinct = true,
    read = read,
    value = value,
    write = write,
    allow = allow,
    take = function(s, p) take(s, p, s.key) end,
    remaining = function(s, p) return clamp(p[1] - count(s, p), 0, p[3]) end,
    reset = oldest,
  }
end
