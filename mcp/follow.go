package mcp

import (
	"context"
	"time"

	"tally/ledger"
)

// Follow is a Config.Changes over ledgers: it signals each commit to a
// session's ledger, and every poll the lines other processes appended to
// its log, until ctx ends or stopped says so. open opens the ledger until
// its release is called, failing while the session has no log (it is
// tried again every poll). One pending signal stands for any number.
func Follow(open func(ctx context.Context, tenant, session string) (*ledger.Ledger, func(), error), poll time.Duration, stopped func() bool) func(ctx context.Context, tenant, session string) (<-chan struct{}, error) {
	return func(ctx context.Context, tenant, session string) (<-chan struct{}, error) {
		out := make(chan struct{}, 1)
		signal := func() {
			select {
			case out <- struct{}{}:
			default:
			}
		}
		go func() {
			defer close(out)
			tick := time.NewTicker(poll)
			defer tick.Stop()
			for {
				if l, release, err := open(ctx, tenant, session); err == nil {
					defer release()
					// The next change is taken before each signal: a commit
					// between the signal's read and a later Changed would
					// close a channel nobody waits on, and go untold.
					changed := l.Changed()
					signal() // what it reads may have changed before it was open
					for {
						select {
						case <-ctx.Done():
							return
						case <-changed:
							changed = l.Changed()
							signal()
						case <-tick.C:
							if stopped() {
								return
							}
							_ = l.Refresh()
							// What Refresh folded closed changed, which
							// this select no longer waits on.
							select {
							case <-changed:
								changed = l.Changed()
								signal()
							default:
							}
						}
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
					if stopped() {
						return
					}
				}
			}
		}()
		return out, nil
	}
}
