package redistest

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// ClusterGroup is a Redis Cluster of three masters, each with one replica.
type ClusterGroup struct {
	// Nodes are the six servers in creation order; redis-cli makes the
	// first three masters, but roles change after FailoverMaster.
	Nodes []*Server
}

// Addrs returns every node's address, usable as cluster seed addresses.
func (c *ClusterGroup) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Cluster starts a 3-master, 3-replica cluster for t (created with
// `redis-cli --cluster create --cluster-replicas 1 --cluster-yes`) and
// stops it when t ends. It returns once every node reports
// cluster_state:ok and every replica is in sync.
func Cluster(t testing.TB) *ClusterGroup {
	t.Helper()
	cli := binary(t, "redis-cli")
	c := &ClusterGroup{}
	for range 6 {
		port := freePort(t, true)
		s := newServer(t, "redis-server", port, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "1000",
			"--cluster-replica-validity-factor", "0",
		})
		s.start()
		t.Cleanup(s.Stop)
		c.Nodes = append(c.Nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.Command(cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	if err := poll(StartTimeout, c.healthy); err != nil {
		t.Fatalf("redistest: cluster never became healthy: %v", err)
	}
	return c
}

// healthy reports nil when every running node sees cluster_state:ok, there
// are three masters, and every replica's link is up.
func (c *ClusterGroup) healthy() error {
	masters := 0
	for _, n := range c.Nodes {
		if n.PID() == 0 {
			continue
		}
		v, err := Do(n.Addr, "CLUSTER", "INFO")
		if err != nil {
			return err
		}
		if st := infoField(fmt.Sprint(v), "cluster_state"); st != "ok" {
			return fmt.Errorf("node %s: cluster_state %q", n.Addr, st)
		}
		switch role(n.Addr) {
		case "master":
			masters++
		case "slave":
			if err := linkUp(n.Addr); err != nil {
				return err
			}
		}
	}
	if masters != 3 {
		return fmt.Errorf("%d masters", masters)
	}
	return nil
}

// Masters returns the nodes whose role is master right now.
func (c *ClusterGroup) Masters() []*Server {
	var out []*Server
	for _, n := range c.Nodes {
		if n.PID() != 0 && role(n.Addr) == "master" {
			out = append(out, n)
		}
	}
	return out
}

// FailoverMaster promotes the replica of master with CLUSTER FAILOVER and
// waits until it is master, the old master replicates from it and the
// cluster is healthy again. It returns the promoted node.
func (c *ClusterGroup) FailoverMaster(t testing.TB, master *Server) *Server {
	t.Helper()
	var replica *Server
	for _, n := range c.Nodes {
		v, err := Do(n.Addr, "ROLE")
		if err != nil {
			continue
		}
		l, _ := v.([]any)
		if len(l) >= 3 && fmt.Sprint(l[0]) == "slave" && portOf(master.Addr) == toInt(l[2]) {
			replica = n
		}
	}
	if replica == nil {
		t.Fatalf("redistest: no replica of %s", master.Addr)
	}
	if _, err := Do(replica.Addr, "CLUSTER", "FAILOVER"); err != nil {
		t.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", replica.Addr, err)
	}
	err := poll(StartTimeout, func() error {
		if r := role(replica.Addr); r != "master" {
			return fmt.Errorf("%s still %q", replica.Addr, r)
		}
		return c.healthy()
	})
	if err != nil {
		t.Fatalf("redistest: cluster failover never completed: %v", err)
	}
	return replica
}

// KeySlotOwner returns the master serving key's slot, asking any node.
func (c *ClusterGroup) KeySlotOwner(key string) (*Server, error) {
	for _, n := range c.Nodes {
		v, err := Do(n.Addr, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot := toInt(v)
		nodes, err := Do(n.Addr, "CLUSTER", "NODES")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(fmt.Sprint(nodes), "\n") {
			f := strings.Fields(line)
			if len(f) < 9 || !strings.Contains(f[2], "master") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, _ := strings.Cut(r, "-")
				if hi == "" {
					hi = lo
				}
				if atoi(lo) <= slot && slot <= atoi(hi) {
					addr, _, _ := strings.Cut(f[1], "@")
					for _, m := range c.Nodes {
						if m.Addr == addr {
							return m, nil
						}
					}
				}
			}
		}
	}
	return nil, fmt.Errorf("no owner found for %q", key)
}

func toInt(v any) int {
	switch x := v.(type) {
	case int64:
		return int(x)
	case string:
		return atoi(x)
	}
	return -1
}

func atoi(s string) int {
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return -1
		}
		n = n*10 + int(r-'0')
	}
	return n
}
