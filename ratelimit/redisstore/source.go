package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
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
// The driver defines decide(KEYS, ARGV); the chunk ends with its call
// (EVAL) or its registration (a Function library, engine.go).
//
//go:embed lua/*.lua
var luaPieces embed.FS

// decideBody is the pieces, concatenated; decideSrc is the script EVAL
// runs (the body, then a call of the driver's decide on KEYS and ARGV) and
// librarySrc the Function library FUNCTION LOAD takes (the body, then the
// registration of decide under functionName, then of the other scripts,
// libraryScripts). Library and functions are named for a digest of all
// their code, as EVALSHA names a script, so gateways of different versions
// sharing one Redis each call their own code.
var (
	decideBody   = assembleDecide(luaPieces)
	decideSrc    = decideBody + "return decide(KEYS, ARGV)\n"
	bodyDigest   = digest(decideBody + scriptsText())
	libraryName  = "tollgate_" + bodyDigest
	functionName = "tollgate_decide_" + bodyDigest
	librarySrc   = "#!lua name=" + libraryName + "\n" + decideBody +
		"redis.register_function('" + functionName + "', decide)\n" + registerScripts()
)

// libraryScript is one of the Store's other scripts (concurrency releases
// and renewals, the override table): an EVAL script, run with EVALSHA on
// servers without Function libraries and, in the library, registered as
// is as the body of a function of KEYS and ARGV, so that both engines run
// the same code.
type libraryScript struct {
	stem string // the function is tollgate_<stem>_<digest>
	src  string
}

// libraryScripts are the library's functions besides decide.
var libraryScripts = []libraryScript{
	{"release", releaseSrc},
	{"renew", renewSrc},
	{"overrides", overridesSrc},
}

// scriptFunction returns the library's name for the function of stem.
func scriptFunction(stem string) string { return "tollgate_" + stem + "_" + bodyDigest }

// scriptsText is every libraryScripts source, for the digest.
func scriptsText() string {
	var b strings.Builder
	for _, sc := range libraryScripts {
		b.WriteString(sc.stem)
		b.WriteString("\n")
		b.WriteString(sc.src)
	}
	return b.String()
}

// registerScripts is the registration of every libraryScripts function:
// an anonymous function (no new local in the chunk) whose
// parameters are the names the script reads.
func registerScripts() string {
	var b strings.Builder
	for _, sc := range libraryScripts {
		b.WriteString("redis.register_function('" + scriptFunction(sc.stem) + "', function(KEYS, ARGV)\n")
		b.WriteString(sc.src)
		b.WriteString("\nend)\n")
	}
	return b.String()
}

// digest is the first 16 hex digits of the SHA-1 of src.
func digest(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:8])
}

// assembleDecide concatenates the pieces of fsys's lua/ directory in the
// order above.
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
	return b.String()
}
