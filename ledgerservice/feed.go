package ledgerservice

import (
	"context"
	"time"

	"tally/ledger"
	"tally/service"
)

var _ service.Feed = (*Local)(nil)

// FeedPollDefault is how often Changes looks for lines other processes
// appended when Config.FeedPoll is zero.
const FeedPollDefault = time.Second

// Changes follows c's session: it signals each commit to the session's
// ledger, and every Config.FeedPoll the lines other processes appended to
// its log, until ctx ends or Config.Stopped says so. The session is held
// while it is followed: through a SessionVisitor for exactly that long (the
// server's cache), else as its Sessions holds it (the CLI's, for the
// process). A session without a log is tried again every poll.
func (s *Local) Changes(ctx context.Context, c service.Call) (<-chan struct{}, error) {
	poll, stopped := s.feedPoll, s.stopped
	open := func(ctx context.Context, follow func(*ledger.Ledger)) error {
		if v, ok := s.sessions.(SessionVisitor); ok {
			return v.Visit(ctx, c.Tenant, c.Session, follow)
		}
		l, err := s.sessions.Open(ctx, c.Tenant, c.Session, false)
		if err != nil {
			return err
		}
		follow(l)
		return nil
	}
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
			done := false
			err := open(ctx, func(l *ledger.Ledger) {
				done = true
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
						// What Refresh folded closed changed, which this
						// select no longer waits on.
						select {
						case <-changed:
							changed = l.Changed()
							signal()
						default:
						}
					}
				}
			})
			if err == nil && done {
				return
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
