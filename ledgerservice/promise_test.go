package ledgerservice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
	"tally/promise"
	"tally/service"
)

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func newLocal(t *testing.T) (*Local, *ledger.Ledger) {
	t.Helper()
	cfg := ledger.DefaultConfig()
	cfg.Now = func() time.Time { return t0 }
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l, err := ledger.Open(t.TempDir(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return New(oneSession{l}, Config{Now: cfg.Now, Timekeeper: cfg.Timekeeper}), l
}

// A declaration is answered from its own record (renderDeclared) instead of
// the state read again under the session lock: the two answers are the
// same document, with or without minted id, task, meta and warnings.
func TestDeclarationAnsweredFromItsRecord(t *testing.T) {
	s, l := newLocal(t)
	for _, d := range []promise.Declare{
		{ID: "r1", Text: "x", By: "reviewer", To: "author", Until: t0.Add(time.Hour)},
		{Text: "minted", By: "reviewer", To: "author", Task: "task-9", Until: t0.Add(-time.Hour), Meta: `{"rung":0}`},
		{ID: "r3", Text: "to self", By: "reviewer", To: "reviewer", Until: t0.Add(time.Hour)},
	} {
		res, _, _, err := l.Execute(context.Background(), ledger.Command{Promise: d}, ledger.WriteOptions{Actor: "reviewer"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		var fromState service.PromiseWritten
		fromRecord := s.renderDeclared(res)
		var want []byte
		l.Read(func(st *ledger.State) { want = s.renderPromise(d.ID, &fromState)(st, res) })
		if got := fromRecord.JSON; !bytes.Equal(got, want) {
			t.Fatalf("from the record:\n%s\nfrom the state:\n%s", got, want)
		}
		if fromRecord.Seq != fromState.Seq || fromRecord.Promise.ID != fromState.Promise.ID {
			t.Fatalf("results differ: %+v, %+v", fromRecord, fromState)
		}
	}
	// A declaration on an antecedent, and every other write, reads the state.
	on := promise.Declare{ID: "r4", Text: "after", By: "reviewer", To: "author", On: "r1", Until: t0.Add(time.Hour)}
	res, _, _, err := l.Execute(context.Background(), ledger.Command{Promise: on}, ledger.WriteOptions{Actor: "reviewer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.renderDeclared(res); got.Seq != 0 || string(got.JSON) != string(api.Doc()) {
		t.Fatalf("a conditional declaration answered from its record: %s", got.JSON)
	}
	w, err := s.AmendPromise(context.Background(), service.Call{Actor: "reviewer"}, api.PromiseAmend{ID: "r4", Until: "3h"})
	if err != nil || w.Promise.State != promise.Conditional || !strings.Contains(string(w.JSON), `"state":"conditional"`) {
		t.Fatalf("amend: %v %+v %s", err, w.Promise, w.JSON)
	}
}

// A request id binds the method and the document: a retry gets the first
// response byte for byte, marked replayed, and appends nothing; the same id
// with another document, or for another method, is refused.
func TestRequestIDReplaysTheResponseDocument(t *testing.T) {
	s, l := newLocal(t)
	ctx := context.Background()
	c := service.Call{Actor: "reviewer", RequestID: "k1"}
	d := api.PromiseDeclare{Promise: "x", To: "author", Until: "2h", Meta: api.Object(`{"a": 1}`)}
	first, err := s.DeclarePromise(ctx, c, d)
	if err != nil || first.Replayed {
		t.Fatalf("first: %v %+v", err, first)
	}
	before := l.Durable().Seq
	again, err := s.DeclarePromise(ctx, c, d)
	if err != nil || !again.Replayed || !bytes.Equal(again.JSON, first.JSON) {
		t.Fatalf("retry: %v replayed=%v\n%s\nwant\n%s", err, again.Replayed, again.JSON, first.JSON)
	}
	if again.Seq != first.Seq || again.Promise.ID != first.Promise.ID || again.Promise.By != "reviewer" {
		t.Fatalf("replayed result %+v, first %+v", again, first)
	}
	if n := l.Durable().Seq; n != before {
		t.Fatalf("a retry appended: seq %d, was %d", n, before)
	}
	var ie *service.IdempotencyError
	d.Promise = "y"
	if _, err := s.DeclarePromise(ctx, c, d); !errors.As(err, &ie) {
		t.Fatalf("another document under the same id: %v", err)
	}
	if _, err := s.AmendPromise(ctx, c, api.PromiseAmend{ID: first.Promise.ID, Until: "3h"}); !errors.As(err, &ie) {
		t.Fatalf("another method under the same id: %v", err)
	}
	// Without a request id the fast path's result is filled as well.
	w, err := s.DeclarePromise(ctx, service.Call{Actor: "reviewer"}, api.PromiseDeclare{Promise: "z", To: "author", Until: "1h"})
	if err != nil || w.Seq <= first.Seq || w.Promise.Until != t0.Add(time.Hour) || len(w.JSON) == 0 {
		t.Fatalf("declare: %v %+v", err, w)
	}
}

// The digest is the same from a reused hasher as from a fresh one.
func TestDigestReusesHashers(t *testing.T) {
	s, _ := newLocal(t)
	fresh, _ := New(nil, Config{}).digest(service.MethodDeclarePromise, api.PromiseDeclare{Promise: "a"})
	for i := 0; i < 3; i++ {
		if got, _ := s.digest(service.MethodDeclarePromise, api.PromiseDeclare{Promise: "a"}); got != fresh {
			t.Fatalf("digest %d: %x, want %x", i, got, fresh)
		}
	}
	if other, _ := s.digest(service.MethodDeclarePromise, api.PromiseDeclare{Promise: "b"}); other == fresh {
		t.Fatal("two documents, one digest")
	}
}
