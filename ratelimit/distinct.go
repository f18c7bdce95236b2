package ratelimit

import (
	"errors"
	"fmt"
	"math/bits"
	"time"
)

// The constants of the Distinct algorithm (ARCHITECTURE.md "distinct").
const (
	// DistinctExact is how many distinct values a key's window holds as
	// an exact set of their hashes; a key past it switches to a
	// HyperLogLog estimate until its window empties. A limit of at most
	// DistinctExact is therefore always exact.
	DistinctExact = 128
	// DistinctHLLBits is the HyperLogLog precision p: 2^p registers of
	// one byte per sub-window. Its standard error is 1.04/sqrt(2^p),
	// about 0.81% (ACCURACY.md measures it).
	DistinctHLLBits = 14
	// DistinctRegisters is 2^DistinctHLLBits.
	DistinctRegisters = 1 << DistinctHLLBits
	// DistinctMaxRank is the largest register value: the rank of a hash
	// whose 64−p high bits are all zero.
	DistinctMaxRank = 64 - DistinctHLLBits + 1
	// DistinctBitmapBits sizes the membership bitmap each sub-window keeps
	// once the key is estimated: 2^17 bits (16 KiB), one per value, at
	// the value's top DistinctBitmapBits bits. A value counts as already
	// counted only when its registers would not rise and its bit is set
	// in a sub-window of the window, so that far fewer new values pass
	// for counted ones than registers alone would let (ACCURACY.md).
	DistinctBitmapBits = 17
	// DistinctBitmap is the bits of one sub-window's bitmap.
	DistinctBitmap = 1 << DistinctBitmapBits
	// DistinctMaxLimit is the largest limit a distinct limit takes: past
	// it the sketch would let too many new values pass for counted ones
	// (a few percent at 10,000, half at 100,000: ACCURACY.md).
	DistinctMaxLimit = 10_000
	// DistinctDefaultBuckets is the number of sub-windows a window is
	// split into when the limit sets no precision.
	DistinctDefaultBuckets = 4
	// DistinctMaxBuckets bounds the sub-windows (W / precision): each
	// holds a register array once the key is estimated.
	DistinctMaxBuckets = 16
	// distinctEntryBytes is one exact value: its hash and the sub-window
	// it was last seen in.
	distinctEntryBytes = 16
	// distinctHeaderBytes is the state besides its values or registers:
	// the newest sub-window and the histogram of the union's registers.
	distinctHeaderBytes = 128 + 8*(DistinctMaxRank+1) + 8*DistinctMaxBuckets + 48*DistinctMaxBuckets
)

// DistinctRegister returns the HyperLogLog register of value hash v and
// the rank it sets there: the register is the low DistinctHLLBits bits,
// the rank one more than the trailing zeros of the rest (at most
// DistinctMaxRank). Every store derives both from v this way.
func DistinctRegister(v uint64) (reg int, rank int) {
	reg = int(v & (DistinctRegisters - 1))
	rest := v>>DistinctHLLBits | 1<<(64-DistinctHLLBits)
	return reg, bits.TrailingZeros64(rest) + 1
}

// DistinctBit returns the bit of value hash v in a sub-window's bitmap.
func DistinctBit(v uint64) int { return int(v >> (64 - DistinctBitmapBits)) }

// distinctPrecision returns the sub-window width of window w: Precision,
// or w / DistinctDefaultBuckets.
func (l *Limit) distinctPrecision(w time.Duration) time.Duration {
	if l.Precision > 0 {
		return l.Precision
	}
	return w / DistinctDefaultBuckets
}

// validateDistinct checks the fields a Distinct limit takes: one rate,
// whose window the precision splits into 1..DistinctMaxBuckets whole
// sub-windows of whole microseconds, and nothing that counts units.
func (l *Limit) validateDistinct() error {
	switch {
	case len(l.Rates) != 1:
		return errors.New("distinct takes exactly one rate")
	case l.Burst != 0:
		return errors.New("burst does not apply to distinct")
	case l.MaxDelay > 0:
		return errors.New("on_limit = \"delay\" does not apply to distinct")
	case l.Batch != nil:
		return errors.New("sync = \"batched\" does not apply to distinct")
	case l.Precision < 0:
		return fmt.Errorf("precision must be positive, got %s", l.Precision)
	case l.Rates[0].Limit > DistinctMaxLimit:
		return fmt.Errorf("distinct counts at most %d values (past it the estimate lets too many new values pass for counted ones), got %d", DistinctMaxLimit, l.Rates[0].Limit)
	}
	w := l.Rates[0].Window
	p := l.distinctPrecision(w)
	if p <= 0 || p%Tick != 0 || w%p != 0 {
		if l.Precision == 0 {
			return fmt.Errorf("window %s does not split into %d whole sub-windows of whole microseconds; set precision", w, DistinctDefaultBuckets)
		}
		return fmt.Errorf("precision %s does not split window %s into whole sub-windows of whole microseconds", p, w)
	}
	if n := w / p; n > DistinctMaxBuckets {
		return fmt.Errorf("precision %s splits window %s into %d sub-windows, more than %d", p, w, n, DistinctMaxBuckets)
	}
	return nil
}

// distinctStateBytes is the most one key of a Distinct limit holds: the
// exact set at its largest, or once estimated the union's registers and
// one register array and one bitmap per sub-window.
func (l *Limit) distinctStateBytes() int64 {
	p := l.Params(0)
	exact := int64(distinctHeaderBytes + distinctEntryBytes*DistinctExact)
	hll := distinctHeaderBytes + DistinctRegisters*(p.Buckets+1) + DistinctBitmap/8*p.Buckets
	return max(exact, hll)
}
