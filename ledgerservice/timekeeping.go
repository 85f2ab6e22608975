package ledgerservice

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"tally/expect"
	"tally/ledger"
	"tally/promise"
	"tally/service"
	"tally/store"
)

var _ service.Timekeeping = (*Local)(nil)

// JournalDirName is the directory of a session's deliveries journal,
// beside its log. Part of the on-disk format: do not rename.
const JournalDirName = "watch"

// Due reads what c's session owes its timekeeper at c.Now, else at Local's
// clock.
func (s *Local) Due(ctx context.Context, c service.Call) (service.Due, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.Due{}, err
	}
	due := service.Due{At: s.at(c)}
	l.Read(func(st *ledger.State) {
		next, ok := st.Expects.NextDue()
		due.Expectations = st.Expects.PendingWithdrawals() > 0 || ok && due.At.After(next)
		due.Claims = len(ledger.DueClaimDeadlines(st, due.At, 1)) > 0
	})
	return due, nil
}

// Sweep commits what is due of kind at the ledger's clock (ledger.Sweep,
// ledger.SweepClaims), as the ledger's timekeeper.
func (s *Local) Sweep(ctx context.Context, c service.Call, kind string, max int) (service.Swept, error) {
	var out service.Swept
	l, err := s.read(ctx, c)
	if err != nil {
		return out, err
	}
	switch kind {
	case service.SweepExpectations:
		res, err := l.Sweep(ctx, max)
		for _, r := range res {
			switch r.Type {
			case expect.TypeLapse:
				out.Lapses++
			case expect.TypeWithdraw:
				out.Withdrawals++
			}
		}
		if err != nil {
			return out, fmt.Errorf("sweep expectations: %w", err)
		}
	case service.SweepClaims:
		res, err := l.SweepClaims(ctx, max)
		out.ClaimFacts = len(res)
		if err != nil {
			return out, fmt.Errorf("sweep claims: %w", err)
		}
	default:
		return out, fmt.Errorf("sweep: no sweep of kind %q", kind)
	}
	return out, nil
}

// Timeline reads the log after since. From the start it reads the state
// (every lapse, every promise) where it has folded the log; after a cursor
// it scans the lines since, then refreshes, so the state each lapse and
// promise is read from is at least as new as the lines.
func (s *Local) Timeline(ctx context.Context, c service.Call, since service.Cursor) (service.Timeline, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return service.Timeline{}, err
	}
	if since != (service.Cursor{}) {
		out, err := followLog(l, since)
		if !errors.Is(err, errDiscontinued) {
			return out, err
		}
	}
	out := service.Timeline{Reset: true, Promises: map[string]service.PromiseTime{}}
	l.ReadAt(func(st *ledger.State, pos store.Position) {
		out.To = cursorOf(pos)
		for _, lv := range st.Expects.Lapses(time.Time{}) {
			out.Lapses = append(out.Lapses, lapsed(st, lv))
		}
		st.Promises.Each(func(p *promise.Promise) bool {
			out.Promises[p.ID] = promiseTime(st.Promises, p)
			return true
		})
	})
	return out, nil
}

// errDiscontinued says a cursor does not continue the log.
var errDiscontinued = errors.New("the cursor does not continue the log")

// followLog reads l's lines after since: lapse records, and the promises
// other records name.
func followLog(l *ledger.Ledger, since service.Cursor) (service.Timeline, error) {
	out := service.Timeline{Promises: map[string]service.PromiseTime{}}
	from := store.Position{Seq: since.Seq, Offset: since.Offset, Hash: since.Hash}
	if since.Seq > l.Position().Seq {
		return out, errDiscontinued // a shorter log than the one read
	}
	var lapses []expect.Event
	touched := map[string]struct{}{}
	pos, _, err := l.Log().Scan(from, func(e store.Entry) error {
		typ, err := promise.PeekType(e.Line)
		if err != nil {
			return nil
		}
		switch {
		case typ == expect.TypeLapse:
			if ev, err := expect.Decode(e.Line); err == nil {
				lapses = append(lapses, ev)
			}
		case promise.Known(typ):
			if ev, err := promise.Decode(e.Line); err == nil {
				touched[ev.ID] = struct{}{}
			}
		}
		return nil
	})
	if err != nil {
		var corrupt *store.CorruptError
		if errors.As(err, &corrupt) && pos == from {
			return out, errDiscontinued // its first line does not chain to the cursor
		}
		return out, fmt.Errorf("read log: %w", err)
	}
	out.To = cursorOf(pos)
	if err := l.Refresh(); err != nil {
		return out, err
	}
	l.Read(func(st *ledger.State) {
		for _, ev := range lapses {
			out.Lapses = append(out.Lapses, lapsed(st, expect.LapseView{
				LapseID: ev.Lapse.LapseID, ExpectationID: ev.Lapse.ExpectationID, Lapse: ev.Lapse.Kind,
				DueAt: ev.Lapse.DueAt, LapsedAt: ev.Lapse.LapsedAt, NoticedAt: ev.TS, By: ev.Lapse.By,
			}))
		}
		for id := range touched {
			if p, ok := st.Promises.Get(id); ok {
				out.Promises[id] = promiseTime(st.Promises, p)
			}
		}
	})
	return out, nil
}

// PromiseTimes reads each of ids the session holds.
func (s *Local) PromiseTimes(ctx context.Context, c service.Call, ids []string) (map[string]service.PromiseTime, error) {
	l, err := s.read(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make(map[string]service.PromiseTime, len(ids))
	l.Read(func(st *ledger.State) {
		for _, id := range ids {
			if p, ok := st.Promises.Get(id); ok {
				out[id] = promiseTime(st.Promises, p)
			}
		}
	})
	return out, nil
}

// JournalDir is the watch directory beside the session's log.
func (s *Local) JournalDir(ctx context.Context, c service.Call) (string, error) {
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, false)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.Dir(), JournalDirName), nil
}

func cursorOf(pos store.Position) service.Cursor {
	return service.Cursor{Seq: pos.Seq, Offset: pos.Offset, Hash: pos.Hash}
}

func lapsed(st *ledger.State, lv expect.LapseView) service.Lapsed {
	out := service.Lapsed{Lapse: lv}
	if v, ok := st.Expects.Expectation(lv.ExpectationID); ok {
		out.Expectation = &v
	}
	if rt, ok := st.Expects.ReplyTo(lv.ExpectationID); ok {
		out.ReplyTo = &rt
	}
	return out
}

func promiseTime(ps *promise.State, p *promise.Promise) service.PromiseTime {
	t := service.PromiseTime{ID: p.ID, Text: p.Text, By: p.By, To: p.To, On: p.On,
		Horizon: len(p.Horizons), Deadline: p.Until()}
	switch ps.Status(p) {
	case promise.Owed:
		t.Standing = service.StandingOwed
	case promise.Conditional:
		t.Standing = service.StandingConditional
	default:
		t.Standing = service.StandingEnded
	}
	return t
}
