package ledger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/promise"
	"tally/refuse"
	"tally/store"
)

func testConfig(now time.Time) Config {
	cfg := DefaultConfig()
	cfg.Now = func() time.Time { return now }
	return cfg
}

func open(t testing.TB, dir string, cfg Config) *Ledger {
	t.Helper()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

func declare(id, by string) promise.Declare {
	return promise.Declare{ID: id, Text: "do " + id, By: by, To: "creditor", Until: t0.Add(time.Hour)}
}

func allViews(l *Ledger, now time.Time) string {
	var b bytes.Buffer
	l.Read(func(st *State) {
		st.Promises.Each(func(p *promise.Promise) bool {
			v := st.Promises.View(p, now)
			b.Write(v.AppendJSON(nil))
			b.WriteByte('\n')
			return true
		})
	})
	return b.String()
}

func TestGroupCommitSharesFsync(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	const n = 64
	var wg sync.WaitGroup
	seqs := make([]uint64, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := l.Submit(context.Background(), declare(fmt.Sprintf("p%d", i), "d"), WriteOptions{Actor: "d"})
			if err != nil {
				t.Error(err)
				return
			}
			seqs[i] = res.Seq
		}(i)
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, s := range seqs {
		if s == 0 || seen[s] {
			t.Fatalf("sequence %d missing or repeated", s)
		}
		seen[s] = true
	}
	st := l.Stats()
	if st.Appended != n || st.Commits >= n {
		t.Fatalf("stats %+v: want %d records in fewer than %d commits", st, n, n)
	}
	if rep := l.Verify(); !rep.Whole() || rep.Lines != n {
		t.Fatalf("verify: %+v", rep)
	}
}

func TestRefusalAppendsNothing(t *testing.T) {
	dir := t.TempDir()
	l := open(t, dir, testConfig(t0))
	if _, err := l.Submit(context.Background(), declare("a", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(l.Log().Path())
	cmds := []promise.Command{
		declare("a", "d"), // duplicate
		promise.Amend{ID: "a", Until: t0},
		promise.Resolve{ID: "a", As: promise.AsReleased},
		promise.Resolve{ID: "zz", As: promise.AsCancelled, Reason: "r"},
	}
	for _, c := range cmds {
		if _, err := l.Submit(context.Background(), c, WriteOptions{Actor: "x"}); err == nil {
			t.Fatalf("%T accepted", c)
		} else if _, ok := refuse.As(err); !ok {
			t.Fatalf("%T: not a refusal: %v", c, err)
		}
	}
	after, _ := os.ReadFile(l.Log().Path())
	if !bytes.Equal(before, after) {
		t.Fatal("a refused command changed the log")
	}
}

// Two ledgers on one directory stand for two processes racing to declare
// the same id: the uniqueness check happens under the file lock, so exactly
// one wins.
func TestUniquenessAcrossProcesses(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, testConfig(t0)), open(t, dir, testConfig(t0))
	for round := 0; round < 20; round++ {
		id := fmt.Sprintf("race-%d", round)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, l := range []*Ledger{a, b} {
			wg.Add(1)
			go func(i int, l *Ledger) {
				defer wg.Done()
				_, errs[i] = l.Submit(context.Background(), declare(id, "d"), WriteOptions{Actor: "d"})
			}(i, l)
		}
		wg.Wait()
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("round %d: both or neither won: %v / %v", round, errs[0], errs[1])
		}
	}
	// And the first resolve check too.
	if _, err := a.Submit(context.Background(), promise.Resolve{ID: "race-0", As: promise.AsCancelled, Reason: "r"}, WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Submit(context.Background(), promise.Resolve{ID: "race-0", As: promise.AsCancelled, Reason: "r"}, WriteOptions{Actor: "d"}); err == nil {
		t.Fatal("second resolve accepted by another process")
	}
}

func TestCheckpointGivesTheSameState(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t0)
	cfg.CheckpointMin = 50
	l := open(t, dir, cfg)
	ctx := context.Background()
	for i := 0; i < 300; i++ {
		id := fmt.Sprintf("p%d", i)
		if _, err := l.Submit(ctx, declare(id, "d"), WriteOptions{Actor: "d"}); err != nil {
			t.Fatal(err)
		}
		switch i % 4 {
		case 1:
			l.Submit(ctx, promise.Amend{ID: id, Until: t0.Add(3 * time.Hour)}, WriteOptions{Actor: "d"})
		case 2:
			l.Submit(ctx, promise.Resolve{ID: id, As: promise.AsSatisfied, Evidence: []string{"e"}}, WriteOptions{Actor: "d"})
		case 3:
			l.Submit(ctx, promise.Assess{ID: id, State: promise.StateViolated}, WriteOptions{Actor: "o"})
		}
	}
	now := t0.Add(2 * time.Hour)
	want := allViews(l, now)
	if _, _, err := l.Log().ReadCheckpoint(); err != nil {
		t.Fatalf("no checkpoint was written: %v", err)
	}
	withCP := open(t, dir, cfg)
	if got := allViews(withCP, now); got != want {
		t.Fatal("state from the checkpoint differs from the fold")
	}
	if err := l.Log().RemoveCheckpoint(); err != nil {
		t.Fatal(err)
	}
	cfg.CheckpointMin = 1 << 30
	without := open(t, dir, cfg)
	if got := allViews(without, now); got != want {
		t.Fatal("state without the checkpoint differs")
	}
	// A checkpoint that does not match the log is ignored and the state is still right.
	os.WriteFile(dir+"/checkpoint", []byte("TALLYCK1 garbage"), 0o644)
	if got := allViews(open(t, dir, cfg), now); got != want {
		t.Fatal("a garbage checkpoint changed the state")
	}
}

func TestRefreshSeesOtherWriters(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, testConfig(t0)), open(t, dir, testConfig(t0))
	a.Submit(context.Background(), declare("x", "d"), WriteOptions{Actor: "d"})
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	found := false
	b.Read(func(st *State) { _, found = st.Promises.Get("x") })
	if !found {
		t.Fatal("reader did not see the other writer's record")
	}
}

const pinkiLedger = `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"pnk_0c2b77","promise":"draft","by":"…/author","to":"…/reviewer","until":"2026-08-31T12:00:00Z"}
{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"desk/ship-91","promise":"hand back a reviewed schema","by":"…/reviewer","to":"…/author","on":"pnk_0c2b77","until":"2026-09-01T17:00:00Z"}
{"ts":"2026-09-01T17:12:00Z","type":"amend","promise":"desk/ship-91","by":"…/reviewer","until":"2026-09-01T18:00:00Z","reason":"nudge 1","meta":{"rung":1}}
{"ts":"2026-09-01T18:30:00Z","type":"escalate","promise":"desk/ship-91","rung":2}
{"ts":"2026-09-01T18:40:00Z","type":"assess","promise":"desk/ship-91","state":"violated","observer":"…/author","note":"deadline passed, nothing delivered","meta":{"seat":"desk"}}
{"ts":"2026-09-02T09:40:00Z","type":"resolve","promise":"desk/ship-91","as":"satisfied","by":"…/reviewer","evidence":["https://example.org/reviews/91"],"meta":{"seat":"reviewer"},"provenance":{"via":"pinki 0.2.0"}}
`

func TestImportExportPinkiByteIdentical(t *testing.T) {
	l := open(t, t.TempDir(), testConfig(t0))
	lines := bytes.Split([]byte(pinkiLedger), []byte{'\n'})
	rep, err := l.Import(context.Background(), lines, WriteOptions{Actor: "importer"})
	if err != nil || rep.Appended != 6 || rep.Unknown != 1 {
		t.Fatalf("import: %+v %v", rep, err)
	}
	var out bytes.Buffer
	var skipped int
	l.Read(func(st *State) { skipped = int(st.Skipped["escalate"].Count) })
	if skipped != 1 {
		t.Fatal("unknown type not counted")
	}
	if _, _, err := l.Lines(func(e store.Entry) error {
		out.Write(store.Body(e.Line))
		out.WriteByte('\n')
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out.String() != pinkiLedger {
		t.Fatalf("round trip differs:\n%s\nwant\n%s", out.String(), pinkiLedger)
	}
	// A bad line refuses the whole import.
	before, _ := os.ReadFile(l.Log().Path())
	bad := strings.Replace(pinkiLedger, `"until":"2026-09-01T18:00:00Z"`, `"until":"tomorrow"`, 1)
	_, err = l.Import(context.Background(), bytes.Split([]byte(bad), []byte{'\n'}), WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), "line 3") {
		t.Fatalf("want a refusal at line 3, got %v", err)
	}
	if after, _ := os.ReadFile(l.Log().Path()); !bytes.Equal(before, after) {
		t.Fatal("a refused import appended")
	}
	if _, err := l.Import(context.Background(), [][]byte{[]byte(`{"type":"promise","tally":"not an envelope"}`)}, WriteOptions{}); err == nil {
		t.Fatal("fake envelope accepted")
	}
}

// Checkpoints made while writers go on (the state frozen under the lock,
// encoded without it) hold exactly the fold of the log up to their line,
// though amends, resolves and assessments changed those promises meanwhile.
func TestCheckpointWhileWritingIsTheFoldAtItsLine(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t0)
	cfg.CheckpointMin = 40
	l := open(t, dir, cfg)
	ctx := context.Background()
	checked := 0
	for wave := 0; wave < 6; wave++ {
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; i < 40; i++ {
					id := fmt.Sprintf("w%d-%d-%d", wave, w, i)
					l.Submit(ctx, declare(id, "d"), WriteOptions{Actor: "d"})
					old := fmt.Sprintf("w%d-%d-%d", max(wave-1, 0), w, i)
					switch i % 3 {
					case 0:
						l.Submit(ctx, promise.Amend{ID: old, Until: t0.Add(time.Duration(i+2) * time.Hour)}, WriteOptions{Actor: "d"})
					case 1:
						l.Submit(ctx, promise.Assess{ID: old, State: promise.StateViolated}, WriteOptions{Actor: "o"})
					case 2:
						l.Submit(ctx, promise.Resolve{ID: old, As: promise.AsSatisfied, Evidence: []string{"e"}}, WriteOptions{Actor: "d"})
					}
				}
			}(w)
		}
		wg.Wait()
		// The syncer starts checkpoints: let it stop first, as Close does.
		l.pipe.Wait()
		pos, payload, err := l.Log().ReadCheckpoint()
		if err != nil {
			continue // none due in this wave
		}
		st := newState(cfg)
		end, _, err := l.Log().ScanUntil(store.Position{}, pos.Offset, st.apply)
		if err != nil || end.Seq != pos.Seq {
			t.Fatalf("wave %d: fold to the checkpoint's line %d: at %d, %v", wave, pos.Seq, end.Seq, err)
		}
		if want := st.Promises.AppendSnapshot(st.snapshotHead().append(nil)); !bytes.Equal(payload, want) {
			t.Fatalf("wave %d: the checkpoint at line %d is not the fold of the log up to it", wave, pos.Seq)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no checkpoint was made while writing")
	}
}
