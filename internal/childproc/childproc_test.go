package childproc

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the helper process of TestChildDiesWithParent: with
// CHILDPROC_HELPER set, it starts a bound `sleep`, prints its pid and waits
// to be killed.
func TestMain(m *testing.M) {
	if os.Getenv("CHILDPROC_HELPER") == "1" {
		cmd := Bind(exec.Command("sleep", "60"))
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(cmd.Process.Pid)
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	code := m.Run()
	KillAll()
	os.Exit(code)
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestChildDiesWithParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Pdeathsig is Linux only")
	}
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary")
	}
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), "CHILDPROC_HELPER=1")
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper said nothing: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		helper.Process.Kill()
		t.Fatalf("helper: %q", line)
	}
	if !alive(pid) {
		t.Fatalf("child %d not running while its parent lives", pid)
	}
	helper.Process.Kill() // SIGKILL: no deferred cleanup runs in the helper
	helper.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d outlived its SIGKILLed parent by 10 s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestKillAll(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary")
	}
	cmd := Bind(exec.Command("sleep", "60"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	KillAll()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("sleep exited cleanly; KillAll did not kill it")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("KillAll left the child running")
	}
	KillAll() // nothing left: must not panic
}
