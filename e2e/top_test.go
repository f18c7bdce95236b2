package e2e

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

// topBody is /admin/top's answer.
type topBody struct {
	Limit, Span string
	K           int
	Denied      struct {
		Total       uint64
		UnlistedMax uint64 `json:"unlisted_max"`
		Clients     []struct {
			Client, Kind string
			Count, Error uint64
			Guaranteed   bool
		}
	}
}

// accessLogHash is the access log's hash of an identity with no salt,
// computed by hand: base64url of the first 12 bytes of
// SHA-256(len(kind) kind value).
func accessLogHash(kind, value string) string {
	sum := sha256.Sum256(append(append([]byte{byte(len(kind))}, kind...), value...))
	return base64.RawURLEncoding.EncodeToString(sum[:12])
}

func topData(redis string, raw bool) map[string]any {
	return map[string]any{"Redis": redis, "TopK": 8, "Raw": raw, "Rate": "3/minute", "TokenEnv": "", "ExtraLimits": ""}
}

// TestTopHeaviestDenied: under mixed traffic (three heavy API keys, twenty
// light ones, clients by IP that stay under the limit), /admin/top names
// the three heaviest denied clients exactly, with counts within their
// error bounds, on the memory store and on Redis. The sketch keeps only 8
// clients, so the light ones churn through it. API keys appear hashed
// even with access_log.raw_client, IPs raw then.
func TestTopHeaviestDenied(t *testing.T) {
	t.Parallel()
	stores(t, func(t *testing.T, addr string) {
		g := startGateway(t, "top.toml.tmpl", gwOpts{Data: topData(addr, true)})
		c := newClient(t, "")
		// Requests per client; the limit allows 3 per minute.
		sends := map[string]int{"heavy-a": 43, "heavy-b": 33, "heavy-c": 23}
		for i := range 20 {
			sends[fmt.Sprint("light-", i)] = 5
		}
		var order []string
		for k, n := range sends {
			for range n {
				order = append(order, k)
			}
		}
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		denied := map[string]uint64{}
		for _, k := range order {
			r := get(t, c, g.url("/api"), map[string]string{"X-API-Key": k})
			switch r.Status {
			case 429:
				denied[accessLogHash("api_key", k)]++
			case 200:
			default:
				t.Fatalf("key %s: %s", k, r)
			}
		}
		// Allowed traffic by IP: never denied, never listed.
		ipc := newClient(t, "127.0.0.3")
		for range 2 {
			if r := get(t, ipc, g.url("/api"), nil); r.Status != 200 {
				t.Fatalf("by IP: %s", r)
			}
		}
		want := []string{accessLogHash("api_key", "heavy-a"), accessLogHash("api_key", "heavy-b"), accessLogHash("api_key", "heavy-c")}
		if denied[want[0]] != 40 || denied[want[1]] != 30 || denied[want[2]] != 20 {
			t.Fatalf("denials per heavy key %v, want 40, 30, 20", []uint64{denied[want[0]], denied[want[1]], denied[want[2]]})
		}
		r := adminDo(t, g, "GET", "/admin/top?limit=per-client&span=1m", "")
		if r.Status != 200 {
			t.Fatalf("GET /admin/top: %s", r)
		}
		var top topBody
		if err := json.Unmarshal(r.Body, &top); err != nil {
			t.Fatalf("decoding %s: %v", r.Body, err)
		}
		var total uint64
		for _, n := range denied {
			total += n
		}
		if top.Limit != "per-client" || top.K != 8 || top.Denied.Total != total || len(top.Denied.Clients) < 3 {
			t.Fatalf("top: %s\nwant limit per-client, k 8, total %d", r.Body, total)
		}
		for i, h := range want {
			got := top.Denied.Clients[i]
			if got.Client != h || got.Kind != "api_key" {
				t.Errorf("client %d is %s (%s), want %s: %s", i, got.Client, got.Kind, h, r.Body)
			}
			if got.Count < denied[h] || got.Count-got.Error > denied[h] {
				t.Errorf("client %s: count %d error %d, true count %d", h, got.Count, got.Error, denied[h])
			}
			if !got.Guaranteed {
				t.Errorf("client %s not guaranteed: %s", h, r.Body)
			}
		}
		for _, cl := range top.Denied.Clients {
			if cl.Client == "127.0.0.3" || len(cl.Client) != 16 {
				t.Errorf("listed client %q: want 16-character hashes of API keys only", cl.Client)
			}
		}
		if r := adminDo(t, g, "GET", "/admin/top?limit=per-client&span=15m", ""); r.Status != 200 {
			t.Errorf("span 15m: %s", r)
		}
	})
}
