package main

// A pool of ready work through the real binary: claims posted to a pool,
// seats racing for one receipt (one wins, the other is refused naming it,
// and the log holds one respondent), and tally ready ordering by priority
// then deadline, locally and as a client of `tally serve`.

import (
	"bytes"
	"strings"
	"sync"
	"testing"
)

// poolRace posts claims to a pool and has worker-1 and worker-2 acquire
// P1's receipt at once, through run (one seat's command line); it returns
// the winner.
func poolRace(t *testing.T, run func(who string, args ...string) result) string {
	t.Helper()
	for _, args := range [][]string{
		{"claim", "create", "P1", "--work", "triage the parser bugs", "--no-checks", "--pool", "worker-1,worker-2", "--priority", "1", "--deadline", "2099-01-02T00:00:00Z"},
		{"claim", "create", "P2", "--work", "any seat may", "--no-checks", "--priority", "1", "--deadline", "2099-01-01T00:00:00Z"},
		{"claim", "create", "P3", "--work", "no deadline", "--no-checks", "--priority", "1"},
		{"claim", "create", "P4", "--work", "urgent", "--no-checks", "--priority", "0", "--deadline", "2099-06-01T00:00:00Z"},
		{"claim", "create", "P5", "--work", "routine", "--no-checks"},
		{"claim", "post", "P1"}, {"claim", "post", "P2"}, {"claim", "post", "P3"}, {"claim", "post", "P4"}, {"claim", "post", "P5"},
	} {
		if r := run("maintainer", args...); r.code != 0 {
			t.Fatalf("%v", r)
		}
	}
	if r := run("worker-1", "promise", "write the notes", "--to", "maintainer", "--until", "2099-01-01T12:00:00Z", "--priority", "1", "--id", "notes"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	var wg sync.WaitGroup
	results := map[string]result{}
	var mu sync.Mutex
	for _, who := range []string{"worker-1", "worker-2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := run(who, "receipt", "acquire", "P1")
			mu.Lock()
			results[who] = r
			mu.Unlock()
		}()
	}
	wg.Wait()
	winner, loser := "worker-1", "worker-2"
	if results[winner].code != 0 {
		winner, loser = loser, winner
	}
	if results[winner].code != 0 || results[loser].code != 1 {
		t.Fatalf("the race: %v\n%v", results["worker-1"], results["worker-2"])
	}
	if want := "tally: claim: receipt already acquired by " + winner + " (generation 1)\n"; results[loser].err != want {
		t.Fatalf("the loser: %q, want %q", results[loser].err, want)
	}
	return winner
}

// wantReady is the loser's ready list after the race: priority first,
// then deadline (none last); P1 is taken.
func wantReady(t *testing.T, out string) {
	t.Helper()
	var ids []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && strings.HasPrefix(f[0], "P") && (f[1] == "claim" || f[1] == "promise") {
			ids = append(ids, f[0]+":"+f[2])
		}
	}
	if got := strings.Join(ids, " "); got != "P0:P4 P1:P2 P1:notes P1:P3 P2:P5" {
		t.Fatalf("ready order %s\n%s", got, out)
	}
}

func TestE2EPoolRaceAndReady(t *testing.T) {
	l := newLedger(t)
	runAs := func(who string, args ...string) result {
		return l.runWith(runOpts{env: []string{"TALLY_ACTOR=" + who}}, args...)
	}
	winner := poolRace(t, runAs)
	if n := bytes.Count(l.logBytes(), []byte(`"type":"claim.receipt"`)); n != 1 {
		t.Fatalf("%d receipt records, want 1", n)
	}
	show := decode(t, l.must("claim", "show", "P1", "--json"))["claim"].(map[string]any)
	if show["respondent"] != winner || show["receipt"].(map[string]any)["holder"] != winner {
		t.Fatalf("P1: %v", show)
	}
	loser := map[string]string{"worker-1": "worker-2", "worker-2": "worker-1"}[winner]
	if loser == "worker-1" {
		r := runAs("worker-1", "ready")
		wantReady(t, r.out)
		if !strings.Contains(r.out, "   tally resolve notes --satisfied --evidence REF\n") {
			t.Fatalf("the promise's command:\n%s", r.out)
		}
	} else {
		// worker-2 owes no notes: its list is the claims alone.
		r := runAs("worker-2", "ready")
		if !strings.Contains(r.out, "P0 claim P4") || strings.Contains(r.out, "claim P1 ") {
			t.Fatalf("worker-2's ready:\n%s", r.out)
		}
		wantReady(t, runAs("worker-1", "ready").out)
	}
	// Every printed command runs as printed: take P4 with its own line.
	r := runAs(winner, "ready", "--as", winner)
	var take string
	for _, line := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(line, "   tally receipt acquire P4 ") {
			take = strings.TrimSpace(line)
		}
	}
	if take != "tally receipt acquire P4 --as "+winner {
		t.Fatalf("no command for P4:\n%s", r.out)
	}
	if r := l.run(strings.Fields(take)[1:]...); r.code != 0 {
		t.Fatalf("%s: %v", take, r)
	}
	if strings.Contains(runAs(winner, "ready").out, "claim P4 ") {
		t.Fatal("P4 still ready after it was taken")
	}
}

func TestRemotePoolRaceAndReady(t *testing.T) {
	s := startServer(t, "maintainer", "worker-1", "worker-2")
	winner := poolRace(t, func(who string, args ...string) result { return s.as(t, who, args...) })
	if n := bytes.Count(s.logBytes(t), []byte(`"type":"claim.receipt"`)); n != 1 {
		t.Fatalf("%d receipt records, want 1", n)
	}
	if winner == "worker-2" {
		wantReady(t, s.as(t, "worker-1", "ready").out)
	}
	r := s.as(t, winner, "ready", "--json")
	doc := decode(t, r.out)
	items := doc["items"].([]any)
	if doc["seat"] != winner || len(items) == 0 || items[0].(map[string]any)["command"] != "tally receipt acquire P4 --as "+winner {
		t.Fatalf("ready --json: %s", r.out)
	}
}
