package transport

import (
	"context"
	"testing"
	"time"
)

// Bytes paced at a rate take at least their share of a second, after a
// first chunk that goes at once; a zero rate and a nil pacer do not wait;
// a cancelled wait returns the context's error.
func TestPacer(t *testing.T) {
	ctx := context.Background()
	p := newPacer(100_000)
	start := time.Now()
	for range 5 {
		if err := p.wait(ctx, 10_000); err != nil {
			t.Fatal(err)
		}
	}
	if got := time.Since(start); got < 40*time.Millisecond {
		t.Errorf("50,000 bytes at 100,000 B/s went in %v, want at least 40ms (the first chunk at once)", got)
	}
	for _, q := range []*pacer{nil, newPacer(0)} {
		start := time.Now()
		for range 100 {
			q.wait(ctx, 1<<30)
		}
		if got := time.Since(start); got > time.Second {
			t.Errorf("an unpaced writer waited %v", got)
		}
	}
	slow := newPacer(1)
	slow.wait(ctx, 1000) // the next may go in 1000 s
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := slow.wait(cctx, 1); err != context.DeadlineExceeded {
		t.Errorf("a cancelled wait: %v", err)
	}
}
