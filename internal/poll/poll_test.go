package poll

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// A cond that comes to hold ends the wait; one that never does fails the
// test, naming what it waited for and how long.
func TestUntil(t *testing.T) {
	n := 0
	Until(t, "the third poll", time.Second, func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times, want 3", n)
	}
	r := &recorder{TB: t}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(r, "nothing", 30*time.Millisecond, func() bool { return false })
	}()
	<-done
	if took := time.Since(start); took < 30*time.Millisecond {
		t.Fatalf("gave up after %v, before its deadline", took)
	}
	if !strings.Contains(r.failed, "timed out after 30ms waiting for nothing") {
		t.Fatalf("failure %q", r.failed)
	}
}

// recorder keeps a Fatalf's message and ends its goroutine as Fatalf does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
