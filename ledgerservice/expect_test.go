package ledgerservice

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
	"tally/service"
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
	as := func(actor, rid string) service.Call { return service.Call{Actor: actor, RequestID: rid} }
	raise := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"},
		SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"}, DueAt: "2026-09-01T11:00:00Z", Basis: "observed",
		Origin: &expect.Origin{TaskID: "t1"}}
	steps := []struct {
		name  string
		run   func(c service.Call) (any, service.Doc, error)
		other func(c service.Call) error // the same id, another document
	}{
		{"raise", func(c service.Call) (any, service.Doc, error) {
			w, err := s.RaiseExpectation(ctx, c, raise)
			return w.Expectation, w.Doc, err
		}, func(c service.Call) error {
			d := raise
			d.Basis = "declared"
			_, err := s.RaiseExpectation(ctx, c, d)
			return err
		}},
		{"supersede", func(c service.Call) (any, service.Doc, error) {
			w, err := s.SupersedeExpectation(ctx, c, "e1", api.ExpectRaise{ExpectationID: "e2", DueAt: "2026-09-01T11:30:00Z"})
			return w.Expectation, w.Doc, err
		}, func(c service.Call) error {
			_, err := s.SupersedeExpectation(ctx, c, "e1", api.ExpectRaise{ExpectationID: "e2", DueAt: "2026-09-01T11:45:00Z"})
			return err
		}},
		{"lapse", func(c service.Call) (any, service.Doc, error) {
			w, err := s.CommitLapse(ctx, service.Call{Actor: s.timekeeper, RequestID: c.RequestID}, api.ExpectLapse{ExpectationID: "e2", Lapse: "overdue"})
			return w.Expectation.Lapses, w.Doc, err
		}, func(c service.Call) error {
			_, err := s.CommitLapse(ctx, service.Call{Actor: s.timekeeper, RequestID: c.RequestID}, api.ExpectLapse{ExpectationID: "e1", Lapse: "overdue"})
			return err
		}},
		{"fact", func(c service.Call) (any, service.Doc, error) {
			f, err := s.RecordFact(ctx, service.Call{Actor: "feed", RequestID: c.RequestID}, api.ExpectFact{FactKey: "f:1", Subject: &expect.Subject{Type: "s", ID: "1"}})
			return []any{f.Seq, f.Fact, f.Satisfied}, f.Doc, err
		}, func(c service.Call) error {
			_, err := s.RecordFact(ctx, service.Call{Actor: "feed", RequestID: c.RequestID}, api.ExpectFact{FactKey: "f:2", Subject: &expect.Subject{Type: "s", ID: "1"}})
			return err
		}},
		{"raise e3", func(c service.Call) (any, service.Doc, error) {
			d := raise
			d.ExpectationID, d.SatisfiedBy = "e3", &api.FactKeyRef{FactKey: "f:3"}
			w, err := s.RaiseExpectation(ctx, c, d)
			return w.Expectation, w.Doc, err
		}, nil},
		{"withdraw", func(c service.Call) (any, service.Doc, error) {
			w, err := s.WithdrawExpectation(ctx, c, "e3", api.ExpectWithdraw{Reason: "rerouted"})
			return w.Expectation, w.Doc, err
		}, func(c service.Call) error {
			_, err := s.WithdrawExpectation(ctx, c, "e3", api.ExpectWithdraw{Reason: "other"})
			return err
		}},
		{"raise e4", func(c service.Call) (any, service.Doc, error) {
			d := raise
			d.ExpectationID, d.SatisfiedBy = "e4", &api.FactKeyRef{FactKey: "f:4"}
			w, err := s.RaiseExpectation(ctx, c, d)
			return w.Expectation, w.Doc, err
		}, nil},
		{"task outcome", func(c service.Call) (any, service.Doc, error) {
			o, err := s.RecordTaskOutcome(ctx, c, "t1", api.ExpectTaskOutcome{Outcome: "cancelled"})
			return []any{o.Seq, o.Task, o.Withdrawn}, o.Doc, err
		}, func(c service.Call) error {
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
			var ie *service.IdempotencyError
			if err := st.other(c); !errors.As(err, &ie) || ie.Code != service.CodeIdempotencyConflict {
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
	c := service.Call{Actor: "agent", RequestID: "r1"}
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
	if _, err := s.RaiseExpectation(ctx, service.Call{Actor: "agent"}, d); err == nil || !strings.Contains(err.Error(), "dueAt: must be an RFC 3339 UTC time ending in Z") {
		t.Fatalf("a relative dueAt in a REST document: %v", err)
	}
	abs, err := api.ExpectRaise{DueAt: "2h", Horizon: "2026-09-02T14:00:00+02:00", RelativeTo: t0}.Absolute()
	if err != nil || abs.DueAt != "2026-09-01T14:00:00Z" || abs.Horizon != "2026-09-02T12:00:00Z" || !abs.RelativeTo.IsZero() {
		t.Fatalf("absolute: %v %+v", err, abs)
	}
}

// An origin task is read with its outcome once recorded and its
// expectations in raise order; a task that is neither is not found.
func TestTaskOrigin(t *testing.T) {
	s, _ := newLocal(t)
	ctx := context.Background()
	c := service.Call{Actor: "agent"}
	if _, err := s.TaskOrigin(ctx, c, "t1"); err == nil || !strings.Contains(err.Error(), "taskId") {
		t.Fatalf("no origin yet: %v", err)
	}
	for _, id := range []string{"e1", "e2"} {
		d := api.ExpectRaise{ExpectationID: id, Kind: "k", Subject: &expect.Subject{Type: "s", ID: id},
			SatisfiedBy: &api.FactKeyRef{FactKey: "f:" + id}, DueAt: "2026-09-01T11:00:00Z", Basis: "observed",
			Origin: &expect.Origin{TaskID: "t1"}}
		if _, err := s.RaiseExpectation(ctx, c, d); err != nil {
			t.Fatal(err)
		}
	}
	o, err := s.TaskOrigin(ctx, c, "t1")
	if err != nil || o.Task.TaskID != "t1" || o.Task.Outcome != "" || len(o.Task.Expectations) != 2 || o.Task.Expectations[0].ExpectationID != "e1" {
		t.Fatalf("open origin: %+v %v", o, err)
	}
	if bytes.Contains(o.JSON, []byte(`"outcome"`)) || !bytes.HasPrefix(o.JSON, []byte(`{"schema_version":1,"task":{"taskId":"t1","expectations":[`)) {
		t.Fatalf("open origin's document: %s", o.JSON)
	}
	if back, err := service.ReadTaskOriginShown(o.Doc); err != nil || !reflect.DeepEqual(back.Task, o.Task) {
		t.Fatalf("read back: %+v %v", back.Task, err)
	}
	if _, err := s.RecordTaskOutcome(ctx, c, "t1", api.ExpectTaskOutcome{Outcome: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	o, err = s.TaskOrigin(ctx, c, "t1")
	if err != nil || o.Task.Outcome != "cancelled" || o.Task.Expectations[1].State != "withdrawn" {
		t.Fatalf("cancelled origin: %+v %v", o, err)
	}
	// An outcome alone makes a task an origin.
	if _, err := s.RecordTaskOutcome(ctx, c, "t2", api.ExpectTaskOutcome{Outcome: "completed"}); err != nil {
		t.Fatal(err)
	}
	if o, err := s.TaskOrigin(ctx, c, "t2"); err != nil || o.Task.Outcome != "completed" || len(o.Task.Expectations) != 0 ||
		!bytes.Contains(o.JSON, []byte(`"expectations":[]`)) {
		t.Fatalf("an outcome alone: %+v %v", o, err)
	}
}
