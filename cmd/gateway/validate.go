package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/tollgate/gateway/keys"
	"github.com/tollgate/gateway/policy"
	"github.com/tollgate/gateway/ratelimit/memstore"
)

// validateCommand implements `gateway validate`.
func validateCommand(args, environ []string, stdout, stderr io.Writer) int {
	var f commonFlags
	fs := newFlagSet("validate", stderr, &f)
	f.addAllowEmpty(fs)
	if err := fs.Parse(args); err != nil {
		return parseExit(err)
	}
	p, err := loadPolicy(f.config, environ)
	for _, w := range unknownEnv(environ, policyEnvNamed(p)) {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	if err == nil {
		err = requireRoutes(p, f.allowEmpty)
	}
	if err != nil {
		printProblems(stderr, f.config, err)
		return exitInvalid
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "%s: OK: %d routes, %d limits, store %s\n", f.config, len(p.Routes), len(p.Limits), p.Store.Backend)
	if p.RLS != nil {
		fmt.Fprintf(stdout, "  rls %s: %d files, %d domains, %d rate limits\n", p.RLS.Listen, len(p.RLS.Files), p.RLS.Config.Domains(), len(p.RLS.Config.Rules()))
	}
	for _, rt := range p.Routes {
		target := "respond"
		if rt.Respond == nil {
			target = rt.Upstream.Redacted()
		}
		names := make([]string, 0, len(rt.Limits))
		for _, l := range rt.Limits {
			names = append(names, l.Name)
		}
		for _, l := range rt.Adaptive {
			names = append(names, l.Name)
		}
		fmt.Fprintf(stdout, "  route %q %s → %s limits=[%s]\n", rt.Name, rt.PathPrefix, target, strings.Join(names, ", "))
	}
	if c := &p.Consumers; c.Enabled() {
		mode := "reject"
		if c.UnknownKey == keys.UnknownKeyAnonymous {
			mode = "anonymous"
		}
		fmt.Fprintf(stdout, "  consumers: %d in %s (%d API keys), plans [%s], unknown API keys: %s\n",
			c.Registry.Len(), c.File, c.Registry.Keys(), strings.Join(p.Plans, ", "), mode)
	}
	printMemory(stdout, p)
	return exitOK
}

// printMemory prints the memory store's bounds and, per limit, the most
// memory one key can take there, so an operator sees before starting
// what max_keys alone would hide (a fine-grained sliding counter or a
// large log takes kilobytes a key).
func printMemory(w io.Writer, p *policy.Policy) {
	maxBytes, how := p.Store.MemoryMaxBytes, ""
	if maxBytes == 0 {
		maxBytes, how = memstore.DefaultMaxBytes(), " (derived from this machine's memory)"
	}
	fmt.Fprintf(w, "  memory store: at most %d keys and %d bytes%s\n", p.Store.MemoryMaxKeys, maxBytes, how)
	for _, l := range p.Limits {
		if l.Adaptive != nil {
			// No store keys: a limiter in each gateway's memory.
			fmt.Fprintf(w, "  limit %q %s: no store keys; about 11 KB in each gateway per limiter (one, or one per route with by = [\"route\"])\n",
				l.Name, policy.AlgorithmAdaptive)
			continue
		}
		kb := memstore.KeyBytes(l.Limit)
		fmt.Fprintf(w, "  limit %q %s: up to %d bytes a key at worst; max_bytes holds %d such keys\n",
			l.Name, l.Algorithm, kb, maxBytes/kb)
	}
}
