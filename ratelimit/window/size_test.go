package window

import (
	"testing"
	"time"
	"unsafe"

	"github.com/tollgate/gateway/ratelimit"
)

// TestStateBytesMatchesTypes: ratelimit.Limit.StateBytes (which bounds a
// log's limit by its memory) counts the sizes of the state types here.
func TestStateBytesMatchesTypes(t *testing.T) {
	if unsafe.Sizeof(logEntry{}) != logEntryBytes {
		t.Fatalf("a log entry is %d bytes, logEntryBytes says %d", unsafe.Sizeof(logEntry{}), logEntryBytes)
	}
	l := &ratelimit.Limit{Name: "log", Algorithm: ratelimit.SlidingWindowLog, Rates: []ratelimit.Rate{{Limit: 1000, Window: time.Hour}}}
	if err := l.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := l.StateBytes(), int64(unsafe.Sizeof(LogState{}))+1000*logEntryBytes; got != want {
		t.Fatalf("StateBytes of a 1000-unit log = %d, the types take %d", got, want)
	}
	c := &ratelimit.Limit{Name: "c", Algorithm: ratelimit.SlidingWindowCounter, Precision: time.Second, Rates: []ratelimit.Rate{{Limit: 1000, Window: time.Hour}}}
	if err := c.Finish(); err != nil {
		t.Fatal(err)
	}
	if got, want := c.StateBytes(), int64(unsafe.Sizeof(SlidingCounterState{}))+8*3601; got != want {
		t.Fatalf("StateBytes of a 3600-bucket counter = %d, the types take %d", got, want)
	}
}
