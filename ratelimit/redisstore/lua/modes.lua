---------------------------------------------------------------- hit modes
-- Counting by response and delaying instead of denying (ARCHITECTURE.md
-- "Counting by response", "Delay"), used by the driver only when a call
-- has a hit that is not an ordinary count or a limit that delays.

-- reserve returns the wait (ticks) of a denied hit whose windows' (ok,
-- retry) pairs start at WR[wi + 1], when it fits in maxdelay (window.Reserve):
-- the pairs then say allowed. nil when it does not fit.
local function reserve(WR, wi, nw, maxdelay)
  local d = 0
  for w = 1, nw do
    if not WR[wi + 2 * w - 1] and WR[wi + 2 * w] > d then d = WR[wi + 2 * w] end
  end
  if d <= 0 or d > maxdelay then return nil end
  for w = 1, nw do WR[wi + 2 * w - 1], WR[wi + 2 * w] = true, 0 end
  return d
end

-- appenddelays appends to the reply, per hit allowed by waiting, its
-- index, delay and mark (0 when the request was denied, so nothing was
-- reserved); returns the new length.
local function appenddelays(out, n, DL, MK)
  for h = 1, nhits do
    if DL[h] then
      out[n + 1], out[n + 2], out[n + 3] = h, DL[h], MK and MK[h] or 0
      n = n + 3
    end
  end
  return n
end

-- cancel (mode 3) gives back the reservation of every hit: its cost from
-- the header, its mark from the string of doubles marks. A key gone since
-- gives back nothing, and so does a key holding another type or a corrupt
-- state: one such key must not keep the call's other keys (a give-back
-- carries up to hundreds) from theirs.
local function cancel(HIT, KEYS, marks, decode, store)
  for h = 1, nhits do
    local b = (h - 1) * 12
    local A, ps = HIT[b + 1], HIT[b + 4]
    local raw = A.cancel and redis.pcall('GET', KEYS[h])
    if type(raw) == 'string' then
      local ok, states = pcall(decode, A, raw, ps)
      if ok then
        A.cancel(states[1], ps[1], HIT[b + 3], sunpack('<d', marks, 8 * (h - 1) + 1))
        store(KEYS[h], A, states, ps)
      end
    end
  end
  return 1
end
