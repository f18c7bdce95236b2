---------------------------------------------------------------- penalty box
-- A limit with a penalty ends its packed parameters with the penalty in
-- ticks (after its max delay, 0 when it has none: modes.lua); its hits' boxes are the KEYS after the hits' own, in hit order,
-- each a fixed_window_elastic state { end, count } (penalty.go). A full
-- box (count >= 1 before its end) denies its hit for the time left; a
-- hit its limit denies fills its box: { now + penalty, 1 }, kept as long.

-- PEN[h] = { box key, penalty ticks, time left when the box is full };
-- nil when no hit has a penalty.
local PEN
local npen = 0

-- penalty notes that hit h's limit has penalty pen.
local function penalty(h, pen)
  PEN = PEN or {}
  npen = npen + 1
  PEN[h] = { npen, pen }
end

-- boxes reads every box: KEYS[nhits + i] for the i-th hit with a penalty,
-- absent when the caller passed none (a usage read). A take (HM[h] == 2:
-- counting a request already forwarded) is not judged by its box.
local function boxes(KEYS, HM)
  for h = 1, nhits do
    local e = PEN[h]
    if e and HM and HM[h] == 2 then
      e[1] = nil
    elseif e then
      local k = KEYS[nhits + e[1]]
      e[1] = k
      local raw = k and redis.call('GET', k)
      if raw then
        if #raw ~= 16 then error('tollgate: corrupt penalty box') end
        local stop, count = sunpack('<dd', raw)
        if now < stop and count >= 1 then e.left = stop - now end
      end
    end
  end
end

-- fillboxes fills the box of every hit its own limit denied (and marks it
-- in the hit's never field as -2), unless it was in the box already or
-- its cost exceeds a capacity (a refusal, not a rate exceeded).
local function fillboxes(HIT)
  for h = 1, nhits do
    local e = PEN[h]
    local b = (h - 1) * 12
    if e and e[1] and not e.left and not HIT[b + 8] and HIT[b + 9] == 0 then
      redis.call('SET', e[1], spack('<dd', now + e[2], 1), 'PX', ceilticks(e[2] / 1000) + margin)
      HIT[b + 9] = -2
    end
  end
end
