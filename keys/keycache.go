package keys

import (
	"crypto/sha256"
	"encoding/base64"
	"hash/maphash"
	"sync/atomic"
)

// keyCache remembers the counter keys of recent inputs, so that a client
// sending request after request (an attacker on its 429s, a busy
// integration) does not cost two SHA-256 sums, their encoding and a string
// every time. It is direct-mapped: each input has one slot, found by a
// keyed hash of its encoding, and an entry is only made for an input seen
// twice in a row in its slot, so that traffic over many keys (every
// request a miss) allocates nothing more than before. Its memory is
// bounded by slots × (maxCachedInput + the key). Safe for concurrent use:
// entries are immutable and swapped atomically.
type keyCache struct {
	seed  maphash.Seed
	slots [cacheSlots]cacheSlot
}

const (
	cacheSlots = 1024
	// maxCachedInput bounds the encoding an entry keeps: longer inputs
	// (long header values) are hashed every time.
	maxCachedInput = 192
)

type cacheSlot struct {
	entry atomic.Pointer[keyEntry]
	// seen is the hash of the last input that missed here: a second miss
	// with the same hash makes an entry.
	seen atomic.Uint64
}

// keyEntry is one input's key: in is the parts' encoding followed by the
// client's (split bytes of parts; -1 without a client part), key the
// counter key built from them.
type keyEntry struct {
	in    string
	split int
	key   string
}

func newKeyCache() *keyCache { return &keyCache{seed: maphash.MakeSeed()} }

// key returns the counter key of the encodings in (parts, then the
// client's from split on; split < 0: no client part), from the cache or
// built and, on a repeated miss, cached. A nil cache builds every key.
func (c *keyCache) key(in []byte, split int) string {
	if c == nil || len(in) > maxCachedInput {
		return string(buildKey(nil, in, split))
	}
	h := maphash.Bytes(c.seed, in)
	s := &c.slots[h%cacheSlots]
	if e := s.entry.Load(); e != nil && e.split == split && e.in == string(in) {
		return e.key
	}
	key := string(buildKey(make([]byte, 0, KeyLen), in, split))
	if s.seen.Swap(h) == h {
		s.entry.Store(&keyEntry{in: string(in), split: split, key: key})
	}
	return key
}

// buildKey appends "{TAG}HASH" (see AppendKey) for the encodings in.
func buildKey(dst, in []byte, split int) []byte {
	parts, client := in, []byte(nil)
	if split >= 0 {
		parts, client = in[:split], in[split:]
	}
	sum := sha256.Sum256(parts)
	tag := sum
	if split >= 0 {
		tag = sha256.Sum256(client)
	}
	dst = append(dst, '{')
	dst = base64.RawURLEncoding.AppendEncode(dst, tag[:hashLen])
	dst = append(dst, '}')
	return base64.RawURLEncoding.AppendEncode(dst, sum[:hashLen])
}
