package redistest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// MasterName is the name under which the Sentinel group monitors its master.
const MasterName = "tollgate"

// SentinelGroup is one master, one replica and three sentinels (quorum 2).
type SentinelGroup struct {
	// Master and Replica are the data servers as started; after Failover
	// their roles are swapped (see MasterAddr).
	Master, Replica *Server
	// Sentinels are the three sentinel processes.
	Sentinels []*Server
	// Name is the monitored master's name.
	Name string
}

// SentinelAddrs returns the sentinels' addresses.
func (g *SentinelGroup) SentinelAddrs() []string {
	out := make([]string, len(g.Sentinels))
	for i, s := range g.Sentinels {
		out[i] = s.Addr
	}
	return out
}

// Sentinel starts a Sentinel group for t and stops it when t ends. It
// returns once every sentinel knows the master, the replica and the other
// sentinels, and the replica is in sync.
func Sentinel(t testing.TB) *SentinelGroup {
	t.Helper()
	binary(t, "redis-sentinel")
	g := &SentinelGroup{Name: MasterName}
	g.Master = newServer(t, "redis-server", freePort(t, false), nil)
	g.Master.start()
	t.Cleanup(g.Master.Stop)
	host, port, _ := net.SplitHostPort(g.Master.Addr)
	g.Replica = newServer(t, "redis-server", freePort(t, false), []string{"--replicaof", host, port})
	g.Replica.start()
	t.Cleanup(g.Replica.Stop)
	if err := poll(StartTimeout, func() error { return linkUp(g.Replica.Addr) }); err != nil {
		t.Fatalf("redistest: replica %s never synced: %v", g.Replica.Addr, err)
	}
	for range 3 {
		s := newSentinel(t, g.Master.Addr)
		s.start()
		t.Cleanup(s.Stop)
		g.Sentinels = append(g.Sentinels, s)
	}
	for _, s := range g.Sentinels {
		err := poll(StartTimeout, func() error {
			v, err := Do(s.Addr, "SENTINEL", "REPLICAS", g.Name)
			if err != nil {
				return err
			}
			if l, _ := v.([]any); len(l) < 1 {
				return fmt.Errorf("sentinel %s sees no replica yet", s.Addr)
			}
			v, err = Do(s.Addr, "SENTINEL", "SENTINELS", g.Name)
			if err != nil {
				return err
			}
			if l, _ := v.([]any); len(l) < 2 {
				return fmt.Errorf("sentinel %s sees %d other sentinels", s.Addr, len(l))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("redistest: sentinel group never converged: %v", err)
		}
	}
	return g
}

// newSentinel prepares a redis-sentinel monitoring master.
func newSentinel(t testing.TB, master string) *Server {
	t.Helper()
	port := freePort(t, false)
	s := newServer(t, "redis-sentinel", port, nil)
	host, mport, _ := net.SplitHostPort(master)
	conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
		"sentinel monitor %s %s %s 2\n"+
		"sentinel down-after-milliseconds %s 1000\n"+
		"sentinel failover-timeout %s 5000\n"+
		"sentinel parallel-syncs %s 1\n",
		port, s.dir, filepath.Join(s.dir, "redis.log"),
		MasterName, host, mport, MasterName, MasterName, MasterName)
	path := filepath.Join(s.dir, "sentinel.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.args = []string{path}
	return s
}

// MasterAddr asks the first reachable sentinel for the current master.
func (g *SentinelGroup) MasterAddr() (string, error) {
	var last error
	for _, s := range g.Sentinels {
		v, err := Do(s.Addr, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", g.Name)
		if err != nil {
			last = err
			continue
		}
		if l, ok := v.([]any); ok && len(l) == 2 {
			return net.JoinHostPort(fmt.Sprint(l[0]), fmt.Sprint(l[1])), nil
		}
		last = fmt.Errorf("unexpected reply %v", v)
	}
	return "", last
}

// Failover asks the sentinels to promote the replica and waits until the
// sentinels report the new master, it answers role master, and the old
// master has become its replica. It returns the new master's address.
func (g *SentinelGroup) Failover(t testing.TB) string {
	t.Helper()
	old, err := g.MasterAddr()
	if err != nil {
		t.Fatalf("redistest: failover: %v", err)
	}
	if _, err := Do(g.Sentinels[0].Addr, "SENTINEL", "FAILOVER", g.Name); err != nil {
		t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	var now string
	err = poll(StartTimeout, func() error {
		now, err = g.MasterAddr()
		if err != nil {
			return err
		}
		if now == old {
			return fmt.Errorf("master still %s", old)
		}
		if r := role(now); r != "master" {
			return fmt.Errorf("new master %s has role %q", now, r)
		}
		if r := role(old); r != "slave" {
			return fmt.Errorf("old master %s has role %q", old, r)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: failover never completed: %v", err)
	}
	return now
}

// role returns the first element of ROLE at addr ("master", "slave", ...).
func role(addr string) string {
	v, err := Do(addr, "ROLE")
	if err != nil {
		return ""
	}
	if l, ok := v.([]any); ok && len(l) > 0 {
		return fmt.Sprint(l[0])
	}
	return ""
}

// linkUp reports nil once addr is a replica whose link to its master is up
// and whose initial sync has finished.
func linkUp(addr string) error {
	v, err := Do(addr, "INFO", "replication")
	if err != nil {
		return err
	}
	info := fmt.Sprint(v)
	if infoField(info, "role") != "slave" || infoField(info, "master_link_status") != "up" ||
		infoField(info, "master_sync_in_progress") != "0" {
		return fmt.Errorf("replica %s not in sync", addr)
	}
	return nil
}

// portOf returns the numeric port of a "host:port" address.
func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}
