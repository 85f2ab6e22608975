package tick

import (
	"context"
	"testing"
	"time"
)

// Every calls f on each tick, in turn, and returns once its context ends,
// calling f no more.
func TestEvery(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		Every(ctx, time.Millisecond, func() {
			calls++
			if calls == 3 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if calls != 3 {
		t.Fatalf("f called %d times, want 3 (none after the context ended)", calls)
	}
}

// A context already ended calls f never.
func TestEveryEnded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Nanosecond, func() { t.Fatal("f called after the context ended") })
}
