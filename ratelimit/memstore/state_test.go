package memstore

import (
	"reflect"
	"testing"

	"github.com/tollgate/gateway/ratelimit/window"
)

// TestInlineStatesHoldNoPointers guards the unsafe view in inline: a state
// type kept in entry.st (an [3]int64 the garbage collector does not scan)
// must not hold a pointer, or the collector could free what it points to.
func TestInlineStatesHoldNoPointers(t *testing.T) {
	for _, v := range []any{
		window.FixedWindowState{}, window.ElasticState{}, window.TokenBucketState{},
		window.GCRAState{}, window.ConcurrencyState{},
	} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			switch k := typ.Field(i).Type.Kind(); k {
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
				reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
				reflect.Float32, reflect.Float64, reflect.Bool:
			default:
				t.Errorf("%s.%s is a %s: inline states must be pointer-free", typ, typ.Field(i).Name, k)
			}
		}
		if typ.Align() > 8 || typ.Size() > 24 {
			t.Errorf("%s: size %d, align %d do not fit entry.st", typ, typ.Size(), typ.Align())
		}
	}
}
