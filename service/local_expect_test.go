package service

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/expect"
	"tally/ledger"
	"tally/store"
)

// lastSeq is the sequence of the last record l folded.
func lastSeq(l *ledger.Ledger) (seq uint64) {
	l.ReadAt(func(_ *ledger.State, pos store.Position) { seq = pos.Seq })
	return seq
}

// Every expectation write answered again under its request id returns the
// first answer: the same document, byte for byte, and the same typed
// result read back from it, appending nothing; the same id with another
// document is refused.
func TestExpectationWritesReplayTheirResult(t *testing.T) {
	s, l := newLocal(t)
	ctx := context.Background()
	as := func(actor, rid string) Call { return Call{Actor: actor, RequestID: rid} }
	raise := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"},
		SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"}, DueAt: "2026-09-01T11:00:00Z", Basis: "observed",
		Origin: &expect.Origin{TaskID: "t1"}}
	steps := []struct {
		name  string
		run   func(c Call) (any, Doc, error)
		other func(c Call) error // the same id, another document
	}{
		{"raise", func(c Call) (any, Doc, error) {
			w, err := s.RaiseExpectation(ctx, c, raise)
			return w.Expectation, w.Doc, err
		}, func(c Call) error {
			d := raise
			d.Basis = "declared"
			_, err := s.RaiseExpectation(ctx, c, d)
			return err
		}},
		{"supersede", func(c Call) (any, Doc, error) {
			w, err := s.SupersedeExpectation(ctx, c, "e1", api.ExpectRaise{ExpectationID: "e2", DueAt: "2026-09-01T11:30:00Z"})
			return w.Expectation, w.Doc, err
		}, func(c Call) error {
			_, err := s.SupersedeExpectation(ctx, c, "e1", api.ExpectRaise{ExpectationID: "e2", DueAt: "2026-09-01T11:45:00Z"})
			return err
		}},
		{"lapse", func(c Call) (any, Doc, error) {
			w, err := s.CommitLapse(ctx, Call{Actor: s.timekeeper, RequestID: c.RequestID}, api.ExpectLapse{ExpectationID: "e2", Lapse: "overdue"})
			return w.Expectation.Lapses, w.Doc, err
		}, func(c Call) error {
			_, err := s.CommitLapse(ctx, Call{Actor: s.timekeeper, RequestID: c.RequestID}, api.ExpectLapse{ExpectationID: "e1", Lapse: "overdue"})
			return err
		}},
		{"fact", func(c Call) (any, Doc, error) {
			f, err := s.RecordFact(ctx, Call{Actor: "feed", RequestID: c.RequestID}, api.ExpectFact{FactKey: "f:1", Subject: &expect.Subject{Type: "s", ID: "1"}})
			return []any{f.Seq, f.Fact, f.Satisfied}, f.Doc, err
		}, func(c Call) error {
			_, err := s.RecordFact(ctx, Call{Actor: "feed", RequestID: c.RequestID}, api.ExpectFact{FactKey: "f:2", Subject: &expect.Subject{Type: "s", ID: "1"}})
			return err
		}},
		{"raise e3", func(c Call) (any, Doc, error) {
			d := raise
			d.ExpectationID, d.SatisfiedBy = "e3", &api.FactKeyRef{FactKey: "f:3"}
			w, err := s.RaiseExpectation(ctx, c, d)
			return w.Expectation, w.Doc, err
		}, nil},
		{"withdraw", func(c Call) (any, Doc, error) {
			w, err := s.WithdrawExpectation(ctx, c, "e3", api.ExpectWithdraw{Reason: "rerouted"})
			return w.Expectation, w.Doc, err
		}, func(c Call) error {
			_, err := s.WithdrawExpectation(ctx, c, "e3", api.ExpectWithdraw{Reason: "other"})
			return err
		}},
		{"raise e4", func(c Call) (any, Doc, error) {
			d := raise
			d.ExpectationID, d.SatisfiedBy = "e4", &api.FactKeyRef{FactKey: "f:4"}
			w, err := s.RaiseExpectation(ctx, c, d)
			return w.Expectation, w.Doc, err
		}, nil},
		{"task outcome", func(c Call) (any, Doc, error) {
			o, err := s.RecordTaskOutcome(ctx, c, "t1", api.ExpectTaskOutcome{Outcome: "cancelled"})
			return []any{o.Seq, o.Task, o.Withdrawn}, o.Doc, err
		}, func(c Call) error {
			_, err := s.RecordTaskOutcome(ctx, c, "t1", api.ExpectTaskOutcome{Outcome: "failed"})
			return err
		}},
	}
	for _, st := range steps {
		c := as("agent", "req-"+strings.ReplaceAll(st.name, " ", "-"))
		first, doc, err := st.run(c)
		if err != nil || doc.Replayed || len(doc.JSON) == 0 {
			t.Fatalf("%s: %v %s", st.name, err, doc.JSON)
		}
		log := lastSeq(l)
		again, redoc, err := st.run(c)
		if err != nil || !redoc.Replayed || !bytes.Equal(doc.JSON, redoc.JSON) {
			t.Fatalf("%s: a retry: %v replayed=%v\nfirst: %s\nretry: %s", st.name, err, redoc.Replayed, doc.JSON, redoc.JSON)
		}
		if !reflect.DeepEqual(first, again) {
			t.Fatalf("%s: a retry's result differs\nfirst: %+v\nretry: %+v", st.name, first, again)
		}
		if st.other != nil {
			var ie *ledger.IdempotencyError
			if err := st.other(c); !errors.As(err, &ie) || ie.Code != ledger.CodeIdempotencyConflict {
				t.Fatalf("%s: the id with another document: %v", st.name, err)
			}
		}
		if log != lastSeq(l) {
			t.Fatalf("%s: a retry appended", st.name)
		}
	}
}

// A document that keeps a relative time (the CLI's --due 2h) asks the same
// whenever it is sent: a retry later, read at a later clock, replays.
func TestExpectationRelativeTimeRetriesLater(t *testing.T) {
	s, _ := newLocal(t)
	ctx := context.Background()
	d := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"},
		SatisfiedBy: &api.FactKeyRef{FactKey: "f"}, DueAt: "2h", Horizon: "1d", Basis: "declared", RelativeTo: t0}
	c := Call{Actor: "agent", RequestID: "r1"}
	w, err := s.RaiseExpectation(ctx, c, d)
	if err != nil || !w.Expectation.CurrentDue.Equal(t0.Add(2*time.Hour)) || !w.Expectation.Horizon.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("raise: %v %+v", err, w.Expectation)
	}
	d.RelativeTo = t0.Add(time.Hour)
	again, err := s.RaiseExpectation(ctx, c, d)
	if err != nil || !again.Replayed || !again.Expectation.CurrentDue.Equal(w.Expectation.CurrentDue) {
		t.Fatalf("a retry an hour later: %v %+v", err, again)
	}
	// Without RelativeTo (a REST body, an A2A record) a time is an instant.
	d.RelativeTo, d.ExpectationID = time.Time{}, "e2"
	if _, err := s.RaiseExpectation(ctx, Call{Actor: "agent"}, d); err == nil || !strings.Contains(err.Error(), "dueAt: must be an RFC 3339 UTC time ending in Z") {
		t.Fatalf("a relative dueAt in a REST document: %v", err)
	}
	abs, err := api.ExpectRaise{DueAt: "2h", Horizon: "2026-09-02T14:00:00+02:00", RelativeTo: t0}.Absolute()
	if err != nil || abs.DueAt != "2026-09-01T14:00:00Z" || abs.Horizon != "2026-09-02T12:00:00Z" || !abs.RelativeTo.IsZero() {
		t.Fatalf("absolute: %v %+v", err, abs)
	}
}
