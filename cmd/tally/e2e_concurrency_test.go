package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startAll starts n processes of tally at once and waits for all of them.
func startAll(t *testing.T, n int, args func(i int) []string) []result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	errs := make([]*bytes.Buffer, n)
	for i := range n {
		cmds[i] = exec.CommandContext(ctx, tallyBin, args(i)...)
		cmds[i].Env = baseEnv()
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmds[i].Stdout, cmds[i].Stderr = outs[i], errs[i]
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	res := make([]result, n)
	for i, c := range cmds {
		err := c.Wait()
		res[i] = result{args: c.Args[1:], out: outs[i].String(), err: errs[i].String()}
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok || !ee.Exited() {
				t.Fatalf("%v: %v", c.Args, err)
			}
			res[i].code = ee.ExitCode()
		}
	}
	return res
}

// TestE2EConcurrentPromises: 32 processes declaring at once land 32 records
// with distinct minted ids and sequence 1..32, and verify passes.
func TestE2EConcurrentPromises(t *testing.T) {
	l := newLedger(t)
	res := startAll(t, 32, func(i int) []string {
		return []string{"--dir", l.dir, "promise", fmt.Sprintf("concurrent %d", i), "--as", fmt.Sprintf("w%d", i), "--to", "boss", "--until", "2h"}
	})
	printed := map[string]bool{}
	for _, r := range res {
		if r.code != 0 {
			t.Fatalf("a concurrent promise failed: %v", r)
		}
		id := strings.TrimSpace(r.out)
		if printed[id] {
			t.Fatalf("id %s printed twice", id)
		}
		printed[id] = true
	}
	lines := l.logLines()
	if len(lines) != 32 {
		t.Fatalf("%d records, want 32", len(lines))
	}
	logged := map[string]bool{}
	for i, ln := range lines {
		if s := envelopeSeq(t, ln); s != uint64(i+1) {
			t.Fatalf("line %d has seq %d", i+1, s)
		}
		var rec struct{ ID string }
		if err := json.Unmarshal(ln, &rec); err != nil {
			t.Fatal(err)
		}
		if logged[rec.ID] || !printed[rec.ID] {
			t.Fatalf("id %s logged twice or never printed", rec.ID)
		}
		logged[rec.ID] = true
	}
	if out := l.must("verify"); !strings.Contains(out, "ok: 32 line(s)") {
		t.Fatalf("verify: %s", out)
	}
}

// TestE2EConcurrentRaces: the uniqueness check and the first-resolve check
// happen under the lock: of 16 processes declaring one id, or resolving one
// promise, exactly one wins; readers running meanwhile never fail.
func TestE2EConcurrentRaces(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "contested", "--as", "a", "--to", "b", "--until", "2h", "--id", "c1")
	var readers sync.WaitGroup
	stop := make(chan struct{})
	var readFail []result
	var mu sync.Mutex
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if r := l.run("ls", "--all", "--json"); r.code != 0 {
					mu.Lock()
					readFail = append(readFail, r)
					mu.Unlock()
				}
			}
		})
	}
	count := func(res []result, field string) int {
		wins := 0
		for _, r := range res {
			switch {
			case r.code == 0:
				wins++
			case r.code != 1 || !strings.Contains(r.err, field+":"):
				t.Errorf("a loser did not exit 1 naming %s: %v", field, r)
			}
		}
		return wins
	}
	dup := startAll(t, 16, func(i int) []string {
		return []string{"--dir", l.dir, "promise", fmt.Sprintf("claim %d", i), "--as", fmt.Sprintf("w%d", i), "--to", "b", "--until", "2h", "--id", "same"}
	})
	if w := count(dup, "id"); w != 1 {
		t.Errorf("%d processes declared id same", w)
	}
	res := startAll(t, 16, func(i int) []string {
		if i%2 == 0 {
			return []string{"--dir", l.dir, "resolve", "c1", "--satisfied", "--evidence", fmt.Sprintf("https://example.org/%d", i), "--as", "a"}
		}
		return []string{"--dir", l.dir, "resolve", "c1", "--released", "--as", "b"}
	})
	if w := count(res, "promise"); w != 1 {
		t.Errorf("%d processes resolved c1", w)
	}
	close(stop)
	readers.Wait()
	for _, r := range readFail {
		t.Errorf("a reader failed during writes: %v", r)
	}
	if n := len(l.logLines()); n != 3 {
		t.Errorf("log has %d lines, want 3", n)
	}
	if out := l.must("verify"); !strings.Contains(out, "ok: 3 line(s)") {
		t.Errorf("verify: %s", out)
	}
}

// crashRound runs the crash child once and kills it with SIGKILL after a
// random delay; it returns what the child acknowledged.
func crashRound(t *testing.T, l *led, rng *rand.Rand, round int) (declared, resolved []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, crashBin,
		"-session", l.sessionDir(), "-prefix", fmt.Sprintf("r%d", round),
		"-workers", fmt.Sprint(1+rng.IntN(6)), "-checkpoint-min", fmt.Sprint(16+rng.IntN(64)))
	cmd.Env = baseEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	done := make(chan []string)
	go func() {
		var acks []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if len(acks) == 0 {
				close(first)
			}
			acks = append(acks, sc.Text())
		}
		if len(acks) == 0 {
			close(first)
		}
		done <- acks
	}()
	// Half the rounds kill at any moment from the start (often while the
	// child is still opening the ledger); half once it has written.
	if round%2 == 0 {
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	} else {
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Fatalf("the crash child acknowledged nothing in 10s: %s", stderr.String())
		}
		time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	acks := <-done
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the crash child exited before the kill (%v): %s", err, stderr.String())
	}
	for _, a := range acks {
		kind, id, ok := strings.Cut(a, " ")
		switch {
		case ok && kind == "declared":
			declared = append(declared, id)
		case ok && kind == "resolved":
			resolved = append(resolved, id)
		default:
			t.Fatalf("the crash child printed %q", a)
		}
	}
	return declared, resolved
}

// TestE2ECrash: a child appending from several goroutines is killed with
// SIGKILL at random moments; everything it acknowledged is in the ledger,
// and verify passes (after the next write, if the kill tore the last line).
func TestE2ECrash(t *testing.T) {
	rounds := 20
	if *torture {
		rounds = 100
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("crash rounds: %d, seed %d", rounds, seed)
	rng := rand.New(rand.NewPCG(seed, 0x7a11))
	l := newLedger(t)
	allDeclared := map[string]bool{}
	allResolved := map[string]bool{}
	torn, total := 0, 0
	for round := range rounds {
		declared, resolved := crashRound(t, l, rng, round)
		total += len(declared) + len(resolved)
		for _, id := range declared {
			if allDeclared[id] {
				t.Fatalf("round %d: id %s acknowledged twice", round, id)
			}
			allDeclared[id] = true
		}
		for _, id := range resolved {
			allResolved[id] = true
		}

		r := l.run("--session", "default/default", "verify")
		if r.code != 0 {
			if r.code != 1 || !strings.Contains(r.err, "incomplete") {
				t.Fatalf("round %d: verify after a kill: %v", round, r)
			}
			torn++
			w := l.run("promise", "after a torn tail", "--as", "probe", "--to", "probe", "--until", "1h", "--id", fmt.Sprintf("probe-%d", round))
			if w.code != 0 || !strings.Contains(strings.ToLower(w.err), "torn") {
				t.Fatalf("round %d: the write after a torn tail: %v", round, w)
			}
			if r := l.run("--session", "default/default", "verify"); r.code != 0 {
				t.Fatalf("round %d: verify after cutting the torn tail: %v", round, r)
			}
		}
		_, ps := promisesOf(t, l.must("ls", "--all", "--json"))
		for id := range allDeclared {
			if ps[id] == nil {
				t.Fatalf("round %d: acknowledged promise %s is missing", round, id)
			}
		}
		for id := range allResolved {
			if ps[id]["state"] != "satisfied" {
				t.Fatalf("round %d: acknowledged resolve of %s is missing: %v", round, id, ps[id])
			}
		}
		if round%5 == 4 || round == rounds-1 {
			// The checkpoint the child left (possibly mid-write) folds to the
			// same state as the log alone.
			const now = "2030-01-01T00:00:00Z"
			with := l.must("ls", "--all", "--json", "--now", now)
			if err := os.Remove(l.cpPath()); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if without := l.must("ls", "--all", "--json", "--now", now); without != with {
				t.Fatalf("round %d: the checkpoint folds to another state than the log", round)
			}
		}
	}
	lines := l.logLines()
	for i, ln := range lines {
		if s := envelopeSeq(t, ln); s != uint64(i+1) {
			t.Fatalf("line %d has seq %d", i+1, s)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(l.sessionDir(), "checkpoint.tmp*"))
	t.Logf("%d rounds: %d acknowledged records, %d log lines, %d torn tails, %d checkpoint temp files left behind",
		rounds, total, len(lines), torn, len(leftovers))
	if total == 0 {
		t.Fatal("the crash child never acknowledged anything")
	}
	if !slices.ContainsFunc(lines, func(b []byte) bool { return bytes.Contains(b, []byte(`"type":"resolve"`)) }) {
		t.Log("no resolve reached the log in this run")
	}
}
