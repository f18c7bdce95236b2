package redisstore

import (
	"context"
	_ "embed"
	"encoding/binary"
	"math"
	"strconv"
	"time"

	"github.com/tollgate/gateway/ratelimit"
)

//go:embed release.lua
var releaseSrc string

// Script modes (the header's mode, lua/common.lua).
const (
	modeDecide = 0
	modeCheck  = 1
	modeRefund = 2
)

// written is what one decide call did to one key: whether it counted there,
// the value it read (old, oldOK: the key existed) and the value it wrote.
type written struct {
	counted bool
	old     string
	oldOK   bool
	new     string
}

// taken is what one modeDecide call on a cluster counted, so that a refund
// can undo it: the call's instant (ticks, as the script used it) and, per
// hit, the values it read and wrote.
type taken struct {
	at   int64
	keys []written
}

// refund asks a modeRefund call to undo t, applying the inverse operations
// at instant at (ticks; ignored with ratelimit.ClockStore, which reads TIME).
type refund struct {
	t  taken
	at int64
	// inverse skips the exact restore of a key untouched since.
	inverse bool
}

// decideHits executes the decide script for hits in one round trip and fills out. With
// rf non-nil (mode modeRefund) it first gives back what rf took. It
// returns what it counted when mode is modeDecide on a cluster. slots are
// the slot ids of the concurrency hits (lease.go; nil when there is none).
func (s *Store) decideHits(ctx context.Context, c caller, mode int, now time.Time, hits []ratelimit.Hit,
	out []ratelimit.Decision, rf *refund, slots []uint64) (bool, taken, error) {
	ca := argPool.Get().(*callArgs)
	defer func() {
		clear(ca.keys)
		clear(ca.args)
		clear(ca.cmd)
		ca.keys, ca.args, ca.hdr.b, ca.cmd = ca.keys[:0], ca.args[:0], ca.hdr.b[:0], ca.cmd[:0]
		argPool.Put(ca)
	}()
	wantOld := s.cluster && mode == modeDecide
	ca.args = append(ca.args, &ca.hdr)
	for _, h := range hits {
		ca.keys = append(ca.keys, s.Key(h.Limit, h.Key))
		ca.args = append(ca.args, s.hitArg(h.Limit, now))
	}
	fixed := rf == nil && slots == nil && fixedHits(mode, wantOld, hits) && distinct(ca.keys)
	switch {
	case oneHit(mode, wantOld, hits):
		ca.hdr.b = s.oneHitHeader(ca.hdr.b, mode, now, hits[0].Cost)
	case fixed:
		ca.hdr.b = s.fixedHeader(ca.hdr.b, mode, now, hits)
	default:
		ca.hdr.b = s.header(ca.hdr.b, mode, now, wantOld, hits)
		ca.hdr.b = appendModes(ca.hdr.b, hits)
	}
	ca.keys = s.appendPenaltyKeys(ca.keys, hits)
	if rf != nil {
		var ts [16]byte
		binary.LittleEndian.PutUint64(ts[:], math.Float64bits(float64(rf.t.at)))
		binary.LittleEndian.PutUint64(ts[8:], math.Float64bits(float64(rf.at)))
		ca.args = append(ca.args, string(ts[:]))
		for _, r := range rf.t.keys {
			nw := r.new
			if rf.inverse {
				nw = "" // never equals a value read: always the inverse
			}
			ca.args = append(ca.args, strconv.Itoa(b2i(r.counted)), nw, strconv.Itoa(b2i(r.oldOK)), r.old)
		}
	}
	if slots != nil {
		for i, h := range hits {
			m := ""
			if slots[i] != 0 {
				m = s.member(h.Cost, slots[i])
			}
			ca.args = append(ca.args, m)
		}
	}
	ca.args = appendDistinctValues(ca.args, hits)
	res, err := s.run(ctx, c, ca.keys, ca.args, &ca.cmd)
	if err != nil {
		return false, taken{}, err
	}
	var allowed bool
	var tk taken
	if counts, ok := res.(string); ok && fixed && len(counts) < 8*(2+7*len(hits)) {
		tk.at, err = fixedReply(counts, hits, out, now.UnixMicro(), s.opts.Clock == ratelimit.ClockLocal)
		allowed = err == nil
	} else {
		allowed, tk, err = parseReply(res, hits, out, wantOld, now.UnixMicro(), s.opts.Clock == ratelimit.ClockLocal)
	}
	if err == nil && s.opts.Clock == ratelimit.ClockStore {
		// Redis decided at its own instant: report it, so that a caller
		// that gives units back (the hybrid store) names their window.
		for i := range hits {
			out[i].At = tk.at
		}
	}
	return allowed, tk, err
}
