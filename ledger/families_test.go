package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/instant"
	"tally/promise"
	"tally/store"
)

func claimCreate(id string) claim.Create {
	return claim.Create{
		Claim: id, Respondent: "worker", Work: "fix the parser", Scope: "repo",
		Slots: []claim.SlotSpec{{Name: "change", Mode: claim.Required, Checks: []claim.CheckSpec{{
			ID: "behavior", Validator: claim.Validator{Name: "command", Version: "1"}, Evaluator: "ci",
			Mode: claim.Required, Phases: []claim.Phase{claim.Programmatic}, Attempts: 1,
		}}}},
	}
}

func familyViews(t *testing.T, l *Ledger, now time.Time) string {
	var out string
	l.Read(func(st *State) {
		c, ok := st.Claims.Claim("C1", now)
		e, ok2 := st.Expects.Expectation("arrive")
		if !ok || !ok2 {
			t.Fatalf("claim %v expectation %v missing", ok, ok2)
		}
		b1, _ := json.Marshal(c)
		b2, _ := json.Marshal(e)
		out = string(b1) + "\n" + string(b2)
	})
	return out
}

// Claims and expectations live in the same session log as promises, fold
// on open, and come back the same through a checkpoint (which re-folds
// their lines from the log).
func TestFamiliesShareTheLogAndCheckpoint(t *testing.T) {
	dir := t.TempDir()
	clock := t0
	cfg := testConfig(t0)
	cfg.Now = func() time.Time { return clock }
	cfg.CheckpointMin = 10
	l := open(t, dir, cfg)
	ctx := context.Background()
	if _, err := l.SubmitClaim(ctx, claimCreate("C1"), WriteOptions{Actor: "boss"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SubmitClaim(ctx, claim.Post{Claim: "C1"}, WriteOptions{Actor: "boss"}); err != nil {
		t.Fatal(err)
	}
	raise := expect.Raise{ExpectationID: "arrive", Kind: "shipment", Subject: expect.Subject{Type: "shipment", ID: "S1"},
		FactKey: "shipment.arrived", DueAt: t0.Add(time.Hour), Basis: "declared"}
	if _, err := l.SubmitExpect(ctx, expect.RaiseCommand{Raise: raise}, false, WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	// Only the timekeeper sweeps; a sweep before the due time commits nothing.
	if res, err := l.Sweep(ctx, 0); err != nil || len(res) != 0 {
		t.Fatalf("early sweep: %v %v", res, err)
	}
	clock = t0.Add(2 * time.Hour)
	res, err := l.Sweep(ctx, 0)
	if err != nil || len(res) != 1 || res[0].Type != "lapse" {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	if res, err := l.Sweep(ctx, 0); err != nil || len(res) != 0 {
		t.Fatalf("second sweep recorded again: %+v %v", res, err)
	}
	for i := 0; i < 20; i++ {
		l.Submit(ctx, declare(fmt.Sprintf("p%d", i), "d"), WriteOptions{Actor: "d"})
	}
	want := familyViews(t, l, clock)
	l.pipe.Wait() // the checkpoint is written in the background
	if _, _, err := l.Log().ReadCheckpoint(); err != nil {
		t.Fatalf("no checkpoint: %v", err)
	}
	if got := familyViews(t, open(t, dir, cfg), clock); got != want {
		t.Fatalf("through the checkpoint:\n%s\nwant\n%s", got, want)
	}
	l.Log().RemoveCheckpoint()
	cfg.CheckpointMin = 1 << 30
	if got := familyViews(t, open(t, dir, cfg), clock); got != want {
		t.Fatal("without the checkpoint the state differs")
	}
	if rep := l.Verify(); !rep.Whole() || len(rep.Skipped) != 0 {
		t.Fatalf("verify: %+v", rep)
	}
}

// An import checks every record with its own family's decoder: a claim or
// expectation line that does not read is refused (nothing appended), and
// only a type no family knows is kept with a warning.
func TestImportChecksEveryFamily(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	good := [][]byte{
		[]byte(`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","claim":"C17"}`),
		[]byte(`{"ts":"2026-09-11T04:10:00Z","type":"fact","factKey":"k","subject":{"type":"shipment","id":"S1"},"at":"2026-09-11T04:00:00Z","by":"feed"}`),
		[]byte(`{"ts":"2026-09-01T17:00:00Z","type":"nudge","promise":"p"}`),
	}
	rep, err := l.Import(context.Background(), good, WriteOptions{Actor: "importer"})
	if err != nil || rep.Appended != 3 || rep.Unknown != 1 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	before, _ := os.ReadFile(l.Log().Path())
	for _, bad := range []string{
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post.failed","claim":"C17"}`,
		`{"ts":"2026-09-11T04:10:00Z","type":"fact","subject":{"type":"shipment","id":"S1"}}`,
		`{"ts":"2026-09-01T17:00:00Z","promise":"p"}`,
	} {
		if _, err := l.Import(context.Background(), [][]byte{[]byte(bad)}, WriteOptions{}); err == nil {
			t.Errorf("imported %s", bad)
		}
	}
	if after, _ := os.ReadFile(l.Log().Path()); !bytes.Equal(before, after) {
		t.Fatal("a refused import appended")
	}
}

// FuzzReadSnapshot feeds arbitrary bytes as a checkpoint's payload over a
// log of every family. The payload is decoded while its sum is still being
// checked, so damage of any shape must come back as an error, never a
// panic; and what it accepts folds on from there like any state.
func FuzzReadSnapshot(f *testing.F) {
	dir := f.TempDir()
	cfg := testConfig(t0)
	l, err := Open(dir, cfg)
	if err != nil {
		f.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	l.Submit(ctx, declare("p1", "d"), WriteOptions{Actor: "d"})
	l.SubmitClaim(ctx, claimCreate("C1"), WriteOptions{Actor: "boss"})
	raise := expect.Raise{ExpectationID: "arrive", Kind: "shipment", Subject: expect.Subject{Type: "shipment", ID: "S1"},
		FactKey: "shipment.arrived", DueAt: t0.Add(time.Hour), Basis: "declared"}
	l.SubmitExpect(ctx, expect.RaiseCommand{Raise: raise}, false, WriteOptions{Actor: "agent"})
	var seed []byte
	l.Read(func(st *State) {
		seed = st.Promises.AppendSnapshot(st.snapshotHead().append(nil))
	})
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := readSnapshot(cfg, data, l.Log())
		if err != nil {
			return
		}
		st.Promises.Each(func(p *promise.Promise) bool {
			_ = st.Promises.Status(p)
			return true
		})
	})
}

// FuzzApply folds arbitrary bytes as a log line's record, after a few
// well-formed ones of every family: the fold never panics, a line it
// refuses changes no promise, and a line it takes leaves a state that
// still answers for every promise.
func FuzzApply(f *testing.F) {
	cfg := testConfig(t0)
	idem := &Idempotency{Principal: "d", Key: "k1", Digest: [32]byte{1}}
	f.Add(requestRecord(t0, idem, 1, []byte(`{"ok":true}`)))
	f.Add(promisePending(promise.Event{TS: t0, Type: promise.TypeResolve, ID: "p1", As: promise.AsSatisfied, By: "d", Evidence: []string{"e"}}).body)
	f.Add([]byte(`{"ts":"2026-09-01T00:00:00Z","type":"claim.post","claim":"C1"}`))
	f.Add([]byte(`{"ts":"2026-09-01T00:00:00Z","type":"someday","x":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st := newState(cfg)
		seed := promisePending(promise.Event{TS: t0, Type: promise.TypePromise, ID: "p1", Text: "t", By: "d", To: "c", Until: instant.Format(t0.Add(time.Hour))})
		if err := st.apply(store.Entry{Line: seed.body, Env: store.Envelope{Seq: 1}}); err != nil {
			t.Fatal(err)
		}
		before := st.Promises.AppendSnapshot(nil)
		if err := st.apply(store.Entry{Line: data, Env: store.Envelope{Seq: 2}, Offset: 100}); err != nil {
			if !bytes.Equal(before, st.Promises.AppendSnapshot(nil)) {
				t.Fatal("a refused line changed the promises")
			}
			return
		}
		st.Promises.Each(func(p *promise.Promise) bool {
			_ = st.Promises.View(p, t0.Add(2*time.Hour))
			return true
		})
	})
}
