package probe

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	n, err := ParseGoroutines([]byte("goroutine profile: total 17\n1 @ 0x1\n"))
	if err != nil || n != 17 {
		t.Errorf("ParseGoroutines = %d, %v; want 17", n, err)
	}
	if _, err := ParseGoroutines([]byte("<html>")); err == nil {
		t.Error("ParseGoroutines accepted a non-profile")
	}
	a, u, err := ParseHeap([]byte("heap profile: 1: 2 [3: 4] @ heap/1048576\n# runtime.MemStats\n# HeapAlloc = 1234\n# HeapInuse = 5678\n"))
	if err != nil || a != 1234 || u != 5678 {
		t.Errorf("ParseHeap = %d, %d, %v; want 1234, 5678", a, u, err)
	}
	if _, _, err := ParseHeap([]byte("# HeapAlloc = 1\n")); err == nil {
		t.Error("ParseHeap accepted a profile without HeapInuse")
	}
	text := "# HELP x\nfoo_total{a=\"1\"} 2\nfoo_total{a=\"}\"} 3\nfoo_total_bar 100\nfoo 9\nfoo_total 5\n"
	if v, ok := ParseMetric([]byte(text), "foo_total"); !ok || v != 10 {
		t.Errorf("ParseMetric(foo_total) = %v, %v; want 10", v, ok)
	}
	if _, ok := ParseMetric([]byte(text), "missing"); ok {
		t.Error("ParseMetric found a missing metric")
	}
}

func TestSelf(t *testing.T) {
	rss, err := RSS(os.Getpid())
	if err != nil || rss <= 0 {
		t.Errorf("RSS(self) = %d, %v", rss, err)
	}
	fds, err := FDs(os.Getpid())
	if err != nil || fds < 3 {
		t.Errorf("FDs(self) = %d, %v", fds, err)
	}
}
