---------------------------------------------------------------- settle
-- settle (mode 4) gives back the units a reservation counted and its
-- request did not use (ratelimit.Settler, window.Giver in Go, bit for
-- bit): per hit its cost from the header, the instant it was counted at
-- from the string of doubles after the limits (ARGV[2 + nhits]), every window of its limit. A key gone
-- since gives back nothing, and so does a key holding another type or a
-- corrupt state (one such key must not keep the others from theirs).
local function settleback(alg, A, s, p, c, at)
  if alg == 1 or alg == 4 then
    -- fixed_window, sliding_window_counter: at's window or bucket (their
    -- cancel is the hybrid give-back, the same rule)
    A.cancel(s, p, c, at)
  elseif alg == 3 then
    -- sliding_window_log: the units logged at the tick at
    A.giveback(s, nil, { ts = { at } }, p, c)
  elseif alg == 5 then
    s[1] = s[1] + c
    if s[1] > p[3] then s[1] = p[3] end
  elseif alg == 6 then
    if s[1] <= now then return end
    local v = s[1] - c * (p[2] / p[1])
    if v < now then v = now end
    s[1] = v
  elseif alg == 8 then
    if at < s[1] or at >= s[2] then return end
    s[3] = s[3] - c
    if s[3] < 0 then s[3] = 0 end
  end
end

local function settle(HIT, KEYS, ARGV, decode, store)
  local ats = ARGV[2 + nhits]
  for h = 1, nhits do
    local b = (h - 1) * 12
    local A, ps = HIT[b + 1], HIT[b + 4]
    local alg = sunpack('<d', ARGV[1 + h])
    local raw = redis.pcall('GET', KEYS[h])
    if type(raw) == 'string' then
      local ok, states = pcall(decode, A, raw, ps)
      if ok then
        local at = sunpack('<d', ats, 8 * (h - 1) + 1)
        for w = 1, #ps do settleback(alg, A, states[w], ps[w], HIT[b + 3], at) end
        store(KEYS[h], A, states, ps)
      end
    end
  end
  return 1
end
