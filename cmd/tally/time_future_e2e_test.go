package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestE2ETimeWatchRefusesTheFuture: a sweep at an instant hours ahead of
// the process's clock is refused (exit 2, naming now and the rule) and
// leaves the log and the journal as they were; with --dry-run it prints the
// lapse and the notices it would record and send, and still records
// nothing; at the process's own instant the sweep records as before.
func TestE2ETimeWatchRefusesTheFuture(t *testing.T) {
	l := newLedger(t)
	l.mustAs("agent", "expect", "raise", "--id", "exp-1", "--kind", "delivery", "--subject", "shipment:1",
		"--fact-key", "arrived:1", "--due", "1h", "--basis", "declared")
	l.mustAs("agent", "promise", "ship it", "--id", "p1", "--to", "ops", "--until", "1h")
	before := l.logBytes()
	journal := filepath.Join(l.sessionDir(), "watch", "journal.jsonl")
	future := time.Now().UTC().Add(2 * time.Hour).Format(time.RFC3339)

	r := l.run("watch", "--once", "--now", future)
	if r.code != 2 || r.out != "" || !strings.Contains(r.err, "tally: now: "+future+" is later than this process's clock") ||
		!strings.Contains(r.err, "by more than 5s") {
		t.Fatalf("a sweep in the future: %v", r)
	}
	if !bytes.Equal(l.logBytes(), before) {
		t.Fatal("the refused sweep changed the log")
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatalf("the refused sweep journaled notices: %v", err)
	}
	// --every is refused the same way, before anything runs.
	if r := l.run("watch", "--every", "1s", "--now", future); r.code != 2 || !strings.Contains(r.err, "tally: now: ") {
		t.Fatalf("watch --every in the future: %v", r)
	}

	r = l.run("watch", "--once", "--dry-run", "--now", future)
	if r.code != 0 {
		t.Fatalf("dry run: %v", r)
	}
	lines := jsonLines(t, r.out)
	if len(lines) < 2 || lines[0]["type"] != "lapse" || lines[0]["expectationId"] != "exp-1" || lines[1]["kind"] != "lapse" {
		t.Fatalf("dry run printed:\n%s", r.out)
	}
	if !strings.Contains(r.out, `"kind":"promise.notice"`) || !strings.Contains(r.err, "would commit 1 lapse(s)") || !strings.Contains(r.err, "nothing recorded") {
		t.Fatalf("dry run: %v", r)
	}
	if !bytes.Equal(l.logBytes(), before) {
		t.Fatal("the dry run changed the log")
	}
	if _, err := os.Stat(journal); !os.IsNotExist(err) {
		t.Fatalf("the dry run journaled notices: %v", err)
	}
	// A ledger without the session yet: the dry run sweeps an empty one
	// and leaves none behind.
	fresh := newLedger(t)
	if r := fresh.run("watch", "--once", "--dry-run"); r.code != 0 || r.out != "" || !strings.Contains(r.err, "would commit 0 lapse(s)") {
		t.Fatalf("dry run on a fresh ledger: %v", r)
	}
	if _, err := os.Stat(fresh.sessionDir()); !os.IsNotExist(err) {
		t.Fatalf("the dry run made the session: %v", err)
	}
	if r := l.run("watch", "--every", "1s", "--dry-run"); r.code != 2 || !strings.Contains(r.err, "dry-run: only with --once") {
		t.Fatalf("dry run with --every: %v", r)
	}
	// Within the skew, and at the clock, the sweep runs: nothing is due yet.
	if r := l.run("watch", "--once", "--now", time.Now().UTC().Format(time.RFC3339)); r.code != 0 || !strings.Contains(r.err, "0 lapse(s)") {
		t.Fatalf("a sweep now: %v", r)
	}
	if !bytes.Equal(l.logBytes(), before) {
		t.Fatal("a sweep with nothing due changed the log")
	}
}
