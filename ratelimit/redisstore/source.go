package redisstore

import (
	"embed"
	"io/fs"
	"slices"
	"strings"
)

// The decide script is assembled from the pieces in lua/: lua/common.lua
// first (the protocol, the call's shared locals and number helpers), then
// every other *.lua in name order (one per algorithm family, each
// registering its handler table in DEF under its algorithm number, as
// common.lua describes), lua/driver.lua last (state I/O and the two-pass
// decision). They are concatenated into one Lua chunk, so a piece sees the
// locals of the pieces before it; adding an algorithm is adding a piece.
//
//go:embed lua/*.lua
var luaPieces embed.FS

// decideSrc is the assembled decide script.
var decideSrc = assembleDecide(luaPieces)

// assembleDecide concatenates the pieces of fsys's lua/ directory in the
// order above and ends the chunk with the call of the driver's decide.
func assembleDecide(fsys fs.FS) string {
	names, err := fs.Glob(fsys, "lua/*.lua")
	if err != nil {
		panic("redisstore: " + err.Error())
	}
	rank := func(n string) int {
		switch n {
		case "lua/common.lua":
			return 0
		case "lua/driver.lua":
			return 2
		}
		return 1
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	for _, n := range names {
		src, err := fs.ReadFile(fsys, n)
		if err != nil {
			panic("redisstore: " + err.Error())
		}
		b.WriteString("-- ")
		b.WriteString(n)
		b.WriteString("\n")
		b.Write(src)
		b.WriteString("\n")
	}
	b.WriteString("return decide(KEYS, ARGV)\n")
	return b.String()
}
