// Package tick runs a piece of background work on a fixed period until
// its context ends: the loop every periodic job of a server or a cluster
// node would otherwise write again.
package tick

import (
	"context"
	"time"
)

// Every calls f every d, the first call d after the start, until ctx is
// done; a call still running when a tick falls due delays the next (the
// ticker drops the ticks missed), so calls never overlap. Once ctx is done f is not called again.
func Every(ctx context.Context, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil {
			return // both were ready: the end wins
		}
		f()
	}
}

// Sleep waits d, or until ctx is done, answering ctx's error then.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
