package redisstore

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// runScript runs one of the Store's scripts besides decide
// (libraryScripts) on the engine the Store chose (engine.go): the library
// function of stem (FCALL), or sc (EVALSHA, EVAL on NOSCRIPT), with keys
// and args on c. As for decide (Store.run), a call is sent again only when Redis
// answered that it does not know the code, which proves that nothing ran:
// "Function not found" (FUNCTION FLUSH, an empty restart, a failover, an
// old library deleted) loads the library and calls once more, then runs
// the script; NOSCRIPT is followed by EVAL (go-redis's Script.Run).
func (s *Store) runScript(ctx context.Context, c caller, stem string, sc *redis.Script, keys []string, args ...any) *redis.Cmd {
	if s.chooseEngine(ctx) != engineFunction {
		return sc.Run(ctx, c, keys, args...)
	}
	fn := scriptFunction(stem)
	cmd := c.FCall(ctx, fn, keys, args...)
	if err := cmd.Err(); err == nil || !isNoFunction(err) {
		return cmd
	}
	if s.loadLibrary(ctx) == nil {
		cmd = c.FCall(ctx, fn, keys, args...)
		if err := cmd.Err(); err == nil || !isNoFunction(err) {
			return cmd
		}
	}
	return sc.Run(ctx, c, keys, args...)
}
