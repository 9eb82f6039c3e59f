package interrupt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// helperEnv makes the test binary the program under test (program).
const helperEnv = "INTERRUPT_TEST_PROGRAM"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) == "1" {
		program()
	}
	os.Exit(m.Run())
}

// program is the program under test: it waits for its context's end,
// says so, and then would go on for a minute.
func program() {
	ctx, stop := Context()
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("cancelled")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// The first SIGTERM cancels the program's context; a second one kills it.
func TestContext(t *testing.T) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(out)
	expect := func(want string) {
		t.Helper()
		if !lines.Scan() || lines.Text() != want {
			t.Fatalf("the program said %q (%v), want %q", lines.Text(), lines.Err(), want)
		}
	}
	expect("ready")
	cmd.Process.Signal(syscall.SIGTERM)
	expect("cancelled")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// The signals are let go just after the context ends: a signal sent
	// in between is the first one's again, so send until one kills it.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	bound := time.After(30 * time.Second)
	for {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
				t.Fatalf("after a second SIGTERM the program ended with %v, want killed by it", err)
			}
			return
		case <-bound:
			t.Fatal("a second SIGTERM did not kill the program")
		case <-tick.C:
		}
	}
}
