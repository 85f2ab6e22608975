// Package poll is how a test waits for something it cannot be told of: it
// asks again until the thing holds or a deadline passes, in place of a
// fixed sleep that a loaded machine outlasts or a fast one wastes.
package poll

import (
	"testing"
	"time"
)

// Until polls cond until it holds and fails t if it does not within d.
// The first polls come quickly (5 ms apart), then the waits double up to
// 50 ms, so a cond that runs a process or a request is not asked in a
// tight loop.
func Until(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	wait := 5 * time.Millisecond
	for end := time.Now().Add(d); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(wait)
		wait = min(2*wait, 50*time.Millisecond)
	}
}
