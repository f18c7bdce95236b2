package redistest

import (
	"testing"
)

func TestStandaloneLifecycle(t *testing.T) {
	s := Standalone(t)
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	pid := s.PID()
	s.Restart()
	if s.PID() == pid || s.PID() == 0 {
		t.Fatalf("restart kept pid %d", pid)
	}
	v, err := s.Do("EXISTS", "k")
	if err != nil || v != int64(0) {
		t.Fatalf("EXISTS k after restart = %v, %v; want 0 (empty server)", v, err)
	}
	s.Stop()
	if _, err := Do(s.Addr, "PING"); err == nil {
		t.Fatalf("PING after Stop succeeded")
	}
}
