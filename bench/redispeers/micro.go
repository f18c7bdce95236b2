package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/redis/go-redis/v9"
)

// microLib is a Function library of single operations, each in a
// function that otherwise only returns its first argument: what one
// command or one Lua operation costs inside redis-server, measured as the
// difference to "floor". The state values are 16 bytes, as a fixed
// window's.
const microLib = `#!lua name=tollgate_micro
local S, C = '0123456789abcdef', '01234567'
local function fl(K, A) return A[1] end
redis.register_function('floor', fl)
redis.register_function('get', function(K, A) redis.call('GET', K[1]) return A[1] end)
redis.register_function('get_set_px_string', function(K, A) redis.call('GET', K[1]) redis.call('SET', K[1], S, 'PX', '60000') return A[1] end)
redis.register_function('get_set_px_number', function(K, A) redis.call('GET', K[1]) redis.call('SET', K[1], S, 'PX', 60000 + #A[1]) return A[1] end)
redis.register_function('get_set_keepttl', function(K, A) redis.call('GET', K[1]) redis.call('SET', K[1], S, 'KEEPTTL') return A[1] end)
redis.register_function('get_setrange', function(K, A) if not redis.call('GET', K[1]) then redis.call('SET', K[1], S, 'PX', '600000') end redis.call('SETRANGE', K[1], '8', C) return A[1] end)
redis.register_function('getex_pxat_setrange', function(K, A) if not redis.call('GETEX', K[1], 'PXAT', '4102444800000') then redis.call('SET', K[1], S, 'PX', '600000') end redis.call('SETRANGE', K[1], '8', C) return A[1] end)
redis.register_function('time', function(K, A) redis.call('TIME') return A[1] end)
redis.register_function('tostring_number', function(K, A) local x = tostring(60000 + #A[1]) return A[1] end)
redis.register_function('unpack_8_doubles', function(K, A) local a, b, c, d, e, f, g, h = struct.unpack('<dddddddd', A[1]) return A[1] end)
redis.register_function('pack_9_doubles_reply', function(K, A) return struct.pack('<ddddddddd', 1, 1.7e15, 1, 0, 1, 1, 0, 12345, 0) end)
redis.register_function('pack_3_doubles_reply', function(K, A) return struct.pack('<ddd', 1, 60000000, 12345) end)
redis.register_function('pack_2_doubles_reply', function(K, A) return struct.pack('<dd', 1, 12345) end)
redis.register_function('number_reply', function(K, A) return 123456789012 + #A[1] end)
redis.register_function('unpack_2_doubles', function(K, A) local a, b = struct.unpack('<dd', A[1]) return A[1] end)
redis.register_function('unpack_3_doubles', function(K, A) local a, b, c = struct.unpack('<ddd', A[1]) return A[1] end)
redis.register_function('pack_1_double', function(K, A) local x = struct.pack('<d', 12345 + #A[1]) return A[1] end)
redis.register_function('table_9_integers_reply', function(K, A) return { 1, 1700000000000000, 1, 0, 1, 1, 0, 12345, 0 } end)
`

// runMicro measures every function of microLib n times under callgrind
// and prints instructions per call and over the floor.
func runMicro(ctx context.Context, srv *server, n int, w io.Writer) error {
	c := newClient(srv.addr, 2)
	defer c.Close()
	if err := c.FunctionLoadReplace(ctx, microLib).Err(); err != nil {
		return err
	}
	f64s := func(vs ...float64) string {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return string(b)
	}
	// A header and a limit's parameters as a one-hit decision sends them.
	hdr := f64s(1.7e15, 0, 0, 0, 60000, 1000, 1, 1)
	lim := f64s(1, 0, 1, 1<<40, 60e6, 1<<40, 60e6, 1)
	var names []string
	for _, l := range strings.Split(microLib, "\n") {
		if name, ok := strings.CutPrefix(l, "redis.register_function('"); ok {
			names = append(names, name[:strings.IndexByte(name, '\'')])
		}
	}
	fmt.Fprintln(w, "| operation (in a Function that returns its first argument) | Redis instr/call | over floor |")
	fmt.Fprintln(w, "|---|---:|---:|")
	var floor float64
	for _, name := range names {
		call := func() error {
			err := c.Do(ctx, "fcall", name, 1, "micro:"+name, hdr, lim).Err()
			if err == redis.Nil {
				err = nil
			}
			return err
		}
		for range 200 {
			if err := call(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := srv.zero(); err != nil {
			return err
		}
		for range n {
			if err := call(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		ins, err := srv.instructions()
		if err != nil {
			return err
		}
		per := float64(ins) / float64(n)
		if name == "floor" {
			floor = per
		}
		fmt.Fprintf(w, "| %s | %.1fk | %+.1fk |\n", name, per/1e3, (per-floor)/1e3)
	}
	return nil
}
