package main

// End-to-end tests of the expectations family and the timekeeper: the real
// binary, separate processes, time chosen with `watch --now`.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"tally/expect"
)

const agent = "agent://booking"

// as runs tally against l as actor.
func (l *led) as(actor string, args ...string) result {
	l.t.Helper()
	return l.runWith(runOpts{env: []string{"TALLY_ACTOR=" + actor}}, args...)
}

func (l *led) mustAs(actor string, args ...string) string {
	l.t.Helper()
	r := l.as(actor, args...)
	if r.code != 0 {
		l.t.Fatalf("want exit 0: %v", r)
	}
	return r.out
}

// watchOnce runs one sweep at now and returns the delivered documents.
func (l *led) watchOnce(now string, extra ...string) []map[string]any {
	l.t.Helper()
	r := l.run(append([]string{"watch", "--once", "--now", now}, extra...)...)
	if r.code != 0 {
		l.t.Fatalf("watch: %v", r)
	}
	return jsonLines(l.t, r.out)
}

func jsonLines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, sc.Text())
		}
		out = append(out, m)
	}
	return out
}

func keysOf(docs []map[string]any) []string {
	var ks []string
	for _, d := range docs {
		ks = append(ks, d["key"].(string))
	}
	return ks
}

// lapseRecords counts the lapse lines in the log by (expectation, kind, due).
func (l *led) lapseRecords() map[string]int {
	l.t.Helper()
	out := map[string]int{}
	for _, line := range l.logLines() {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			l.t.Fatal(err)
		}
		if m["type"] == "lapse" {
			out[fmt.Sprint(m["expectationId"], "/", m["lapse"], "/", m["dueAt"])]++
		}
	}
	return out
}

func (l *led) expectation(id string) map[string]any {
	l.t.Helper()
	return decode(l.t, l.must("expect", "show", id, "--json"))["expectation"].(map[string]any)
}

func TestExpectShipmentExample(t *testing.T) {
	l := newLedger(t)
	l.mustAs(agent, "expect", "raise", "--id", "exp-01J8Q0DEPART", "--kind", "shipment.departure",
		"--subject", "shipment:PA-2026-0901", "--fact-key", "shipment.departed:PA-2026-0901",
		"--due", "2026-09-11T03:15:00Z", "--grace", "2h", "--basis", "observed", "--task", "task-7")
	// The draft's arrival, as one JSON document on stdin.
	arrival := `{"expectationId":"exp-01J8Q0ARRIVE","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-2026-0901"},
"expects":"an arrival event at DOH","satisfiedBy":{"factKey":"shipment.arrived:PA-2026-0901"},"dueAt":"2026-09-11T05:00:00Z",
"grace":"PT6H","anchor":{"expectationId":"exp-01J8Q0DEPART","offset":"PT1H45M"},"after":["exp-01J8Q0DEPART"],
"horizon":"2026-09-13T05:00:00Z","basis":"observed","origin":{"taskId":"task-7","contextId":"ctx-3"}}`
	r := l.runWith(runOpts{stdin: arrival, env: []string{"TALLY_ACTOR=" + agent}}, "expect", "raise", "-", "--json")
	if r.code != 0 {
		t.Fatal(r)
	}
	// Unknown fields are refused by name.
	r = l.runWith(runOpts{stdin: `{"expectationId":"x","colour":"red"}`, env: []string{"TALLY_ACTOR=" + agent}}, "expect", "raise", "-", "--json")
	if r.code != 2 || !strings.Contains(r.err, "colour") {
		t.Fatalf("unknown field: %v", r)
	}

	// Departure lands late (04:00, due 03:15): arrival's current due moves
	// to 04:00 + 1h45m; its projected due stays.
	out := l.mustAs("carrier-feed", "fact", "shipment.departed:PA-2026-0901", "--subject", "shipment:PA-2026-0901", "--at", "2026-09-11T04:00:00Z", "--json")
	if sat := decode(t, out)["satisfied"].([]any); len(sat) != 1 || sat[0] != "exp-01J8Q0DEPART" {
		t.Fatalf("fact: %s", out)
	}
	v := l.expectation("exp-01J8Q0ARRIVE")
	if v["state"] != "open" || v["projectedDue"] != "2026-09-11T05:00:00Z" || v["currentDue"] != "2026-09-11T05:45:00Z" {
		t.Fatalf("arrival after a late departure: %v", v)
	}
	if d := l.expectation("exp-01J8Q0DEPART"); d["state"] != "satisfied" || d["actualAt"] != "2026-09-11T04:00:00Z" {
		t.Fatalf("departure: %v", d)
	}

	// No arrival fact: overdue once current due + grace (11:45) has passed.
	if docs := l.watchOnce("2026-09-11T11:45:00Z"); len(docs) != 0 {
		t.Fatalf("lapse at the instant itself: %v", docs)
	}
	docs := l.watchOnce("2026-09-11T11:45:01Z")
	if len(docs) != 1 {
		t.Fatalf("want one lapse notice, got %v", docs)
	}
	lp := docs[0]["lapse"].(map[string]any)
	if lp["lapse"] != "overdue" || lp["expectationId"] != "exp-01J8Q0ARRIVE" || lp["dueAt"] != "2026-09-11T05:45:00Z" || lp["lapsedAt"] != "2026-09-11T11:45:00Z" {
		t.Fatalf("overdue lapse: %v", lp)
	}
	if docs := l.watchOnce("2026-09-12T00:00:00Z"); len(docs) != 0 {
		t.Fatalf("second sweep delivered %v", docs)
	}
	// The arrival lands before the horizon: no stalled lapse.
	l.mustAs("carrier-feed", "fact", "shipment.arrived:PA-2026-0901", "--subject", "shipment:PA-2026-0901", "--at", "2026-09-12T02:00:00Z")
	if docs := l.watchOnce("2026-09-14T00:00:00Z"); len(docs) != 0 {
		t.Fatalf("after arrival: %v", docs)
	}
	v = l.expectation("exp-01J8Q0ARRIVE")
	if v["state"] != "satisfied" || v["actualAt"] != "2026-09-12T02:00:00Z" || len(v["lapses"].([]any)) != 1 {
		t.Fatalf("arrival at the end: %v", v)
	}

	// A later step's fact while the earlier one is open: skipped.
	l.mustAs(agent, "expect", "raise", "--id", "s2-depart", "--kind", "shipment.departure", "--subject", "shipment:S2",
		"--fact-key", "departed:S2", "--due", "2026-09-20T00:00:00Z", "--basis", "contract")
	l.mustAs(agent, "expect", "raise", "--id", "s2-arrive", "--kind", "shipment.arrival", "--subject", "shipment:S2",
		"--fact-key", "arrived:S2", "--due", "2026-09-21T00:00:00Z", "--after", "s2-depart", "--basis", "contract")
	l.mustAs("carrier-feed", "fact", "arrived:S2", "--subject", "shipment:S2", "--at", "2026-09-15T10:00:00Z")
	docs = l.watchOnce("2026-09-15T10:00:01Z")
	if len(docs) != 1 {
		t.Fatalf("skipped: %v", docs)
	}
	if lp := docs[0]["lapse"].(map[string]any); lp["lapse"] != "skipped" || lp["expectationId"] != "s2-depart" || lp["lapsedAt"] != "2026-09-15T10:00:00Z" {
		t.Fatalf("skipped lapse: %v", lp)
	}

	// No fact of any kind by the horizon: stalled (and overdue first).
	l.mustAs(agent, "expect", "raise", "--id", "s3", "--kind", "shipment.arrival", "--subject", "shipment:S3",
		"--fact-key", "arrived:S3", "--due", "2026-09-20T00:00:00Z", "--horizon", "2026-09-22T00:00:00Z", "--basis", "declared")
	docs = l.watchOnce("2026-09-25T00:00:00Z")
	var kinds []string
	for _, d := range docs {
		lp := d["lapse"].(map[string]any)
		kinds = append(kinds, fmt.Sprint(lp["expectationId"], ":", lp["lapse"]))
	}
	// s2-depart is still open past its due: overdue too (s2-arrive was met
	// before its due).
	sort.Strings(kinds)
	if strings.Join(kinds, " ") != "s2-depart:overdue s3:overdue s3:stalled" {
		t.Fatalf("late sweep: %v", kinds)
	}
	lapses := decode(t, l.must("lapses", "--json"))["lapses"].([]any)
	recs := l.lapseRecords()
	if len(lapses) != len(recs) {
		t.Fatalf("lapses %d, records %v", len(lapses), recs)
	}
	for k, n := range recs {
		if n != 1 {
			t.Fatalf("lapse %s recorded %d times", k, n)
		}
	}
	// Every lapse record was appended as the timekeeper.
	for _, line := range l.logLines() {
		if bytes.Contains(line, []byte(`"type":"lapse"`)) && !bytes.Contains(line, []byte(`"actor":"tally/timekeeper"`)) {
			t.Fatalf("lapse not appended as the timekeeper: %s", line)
		}
	}
}

func TestExpectWithdrawalLineageAndForgery(t *testing.T) {
	l := newLedger(t)
	raise := func(id, task, due string) {
		l.mustAs(agent, "expect", "raise", "--id", id, "--kind", "k", "--subject", "doc:"+id, "--fact-key", "done:"+id,
			"--due", due, "--basis", "declared", "--task", task)
	}
	raise("c1", "task-c", "2026-09-01T00:00:00Z")
	raise("c2", "task-c", "2026-09-01T00:00:00Z")
	raise("f1", "task-f", "2026-09-01T00:00:00Z")
	raise("k1", "task-k", "2026-09-01T00:00:00Z")
	out := decode(t, l.mustAs(agent, "task", "outcome", "task-c", "--cancelled", "--json"))
	if fmt.Sprint(out["withdrawn"]) != "[c1 c2]" {
		t.Fatalf("cancelled: %v", out)
	}
	out = decode(t, l.mustAs(agent, "task", "outcome", "task-f", "--failed", "--json"))
	if fmt.Sprint(out["withdrawn"]) != "[f1]" {
		t.Fatalf("failed: %v", out)
	}
	l.mustAs(agent, "task", "outcome", "task-k", "--completed")
	if v := l.expectation("c1"); v["state"] != "withdrawn" {
		t.Fatalf("c1: %v", v)
	}
	docs := l.watchOnce("2026-09-02T00:00:00Z")
	if len(docs) != 1 || docs[0]["lapse"].(map[string]any)["expectationId"] != "k1" {
		t.Fatalf("only k1 lapses: %v", docs)
	}
	r := l.as(agent, "expect", "raise", "--id", "c3", "--kind", "k", "--subject", "doc:c3", "--fact-key", "x", "--due", "1h", "--basis", "declared", "--task", "task-c")
	if r.code != 1 {
		t.Fatalf("raise on a cancelled task: %v", r)
	}

	// Lineage: x1 → x2 → x3 is within the bound (3); x4 needs a person.
	l.mustAs(agent, "expect", "raise", "--id", "x1", "--kind", "k", "--subject", "doc:x", "--fact-key", "done:x",
		"--due", "2026-12-01T00:00:00Z", "--basis", "declared")
	l.mustAs(agent, "expect", "supersede", "x1", "--id", "x2", "--due", "2026-12-02T00:00:00Z")
	r = l.as(agent, "expect", "supersede", "x2", "--id", "x3", "--json")
	if r.code != 1 || !strings.Contains(r.err, "identical to ancestor") {
		t.Fatalf("identical extension: %v", r)
	}
	r = l.as(agent, "expect", "supersede", "x2", "--id", "x3", "--due", "2026-12-01T00:00:00Z", "--json")
	if r.code != 1 || !strings.Contains(r.err, "identical to ancestor x1") {
		t.Fatalf("identical to a grand-ancestor: %v", r)
	}
	l.mustAs(agent, "expect", "supersede", "x2", "--id", "x3", "--due", "2026-12-03T00:00:00Z")
	r = l.as(agent, "expect", "supersede", "x3", "--id", "x4", "--due", "2026-12-04T00:00:00Z", "--json")
	if r.code != 1 || !strings.Contains(r.err, "lineage bound") || !strings.Contains(r.err, `"code":"forbidden"`) {
		t.Fatalf("past the bound: %v", r)
	}
	r = l.as("ops-lead", "expect", "supersede", "x3", "--id", "x4", "--due", "2026-12-04T00:00:00Z", "--human", "--json")
	if r.code != 0 {
		t.Fatalf("a person past the bound: %v", r)
	}
	v := decode(t, r.out)["expectation"].(map[string]any)
	if fmt.Sprint(v["lineage"]) != "[x1 x2 x3 x4]" || v["supersedes"] != "x3" || v["currentDue"] != "2026-12-04T00:00:00Z" || v["human"] != true {
		t.Fatalf("x4: %v", v)
	}
	if v := l.expectation("x1"); v["state"] != "superseded" || v["supersededBy"] != "x2" {
		t.Fatalf("x1: %v", v)
	}

	// Forgery: a lapse line imported (or appended by anyone) is kept but
	// never folded; only the timekeeper's lapses count.
	before := len(decode(t, l.must("lapses", "--json"))["lapses"].([]any))
	id := expect.LapseID("x4", expect.LapseOverdue, time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	forged := `{"ts":"2026-09-05T00:00:00Z","type":"lapse","lapseId":"` + id + `","expectationId":"x4","lapse":"overdue","dueAt":"2026-12-04T00:00:00Z","lapsedAt":"2026-12-04T00:00:00Z","by":"tally/timekeeper"}`
	if r := l.runWith(runOpts{stdin: forged + "\n", env: []string{"TALLY_ACTOR=mallory"}}, "import", "-"); r.code != 0 {
		t.Fatalf("import: %v", r)
	}
	if after := len(decode(t, l.must("lapses", "--json"))["lapses"].([]any)); after != before {
		t.Fatalf("a forged lapse was folded: %d → %d", before, after)
	}
	if v := l.expectation("x4"); len(v["lapses"].([]any)) != 0 {
		t.Fatalf("x4 lapses: %v", v["lapses"])
	}
}

// raiseMany raises n expectations due at base + i minutes, each on its own
// subject, through one process per expectation.
func raiseMany(l *led, n int, base time.Time) {
	l.t.Helper()
	for i := 0; i < n; i++ {
		l.mustAs(agent, "expect", "raise", "--id", fmt.Sprint("e", i), "--kind", "k", "--subject", fmt.Sprint("s:", i),
			"--fact-key", fmt.Sprint("f", i), "--due", base.Add(time.Duration(i)*time.Minute).Format(time.RFC3339),
			"--horizon", base.Add(time.Duration(i)*time.Minute+time.Hour).Format(time.RFC3339), "--basis", "declared")
	}
}

// checkOnce wants want distinct lapses in the log, each recorded once.
func checkOnce(t *testing.T, l *led, want int) {
	t.Helper()
	eachOnce(t, "recorded", l.lapseRecords(), want)
}

// eachOnce wants want distinct lapses in counts, each counted once.
func eachOnce(t *testing.T, what string, counts map[string]int, want int) {
	t.Helper()
	for k, n := range counts {
		if n != 1 {
			t.Fatalf("lapse %s %s %d times", k, what, n)
		}
	}
	if len(counts) != want {
		t.Fatalf("%d distinct lapses %s, want %d", len(counts), what, want)
	}
}

func TestExpectConcurrentWatchersRecordEachLapseOnce(t *testing.T) {
	l := newLedger(t)
	const n = 24
	base := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	raiseMany(l, n, base)
	delivered := map[string]int{}
	var mu sync.Mutex
	for round := 1; round <= 4; round++ {
		now := base.Add(time.Duration(round*n/4)*time.Minute + 30*time.Second).Format(time.RFC3339)
		var wg sync.WaitGroup
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := run(t, runOpts{}, "--dir", l.dir, "watch", "--once", "--now", now)
				if r.code != 0 {
					t.Error(r)
					return
				}
				mu.Lock()
				for _, k := range keysOf(jsonLines(t, r.out)) {
					delivered[k]++
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	checkOnce(t, l, n) // every expectation overdue once; no horizon passed yet
	eachOnce(t, "delivered by two watchers sharing a journal", delivered, n)
}

func TestExpectKilledWatcherRestarts(t *testing.T) {
	l := newLedger(t)
	const n = 40
	base := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	raiseMany(l, n, base)
	now := base.Add(3 * time.Hour).Format(time.RFC3339) // every overdue and stalled lapse is due
	for round := 0; round < 3; round++ {
		cmd := exec.Command(tallyBin, "--dir", l.dir, "watch", "--every", "5ms", "--now", now)
		cmd.Env = baseEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(5+round*15) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
	}
	docs := l.watchOnce(now)
	checkOnce(t, l, 2*n)
	// Every lapse was delivered at least once (journal), the last timekeeper
	// sending only what the killed ones had not journaled.
	journal, err := os.ReadFile(filepath.Join(l.sessionDir(), "watch", "journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, d := range jsonLines(t, string(journal)) {
		keys[d["key"].(string)] = true
	}
	if len(keys) != 2*n {
		t.Fatalf("journal holds %d keys, want %d (last watcher sent %d)", len(keys), 2*n, len(docs))
	}
	if docs := l.watchOnce(now); len(docs) != 0 {
		t.Fatalf("a sweep after everything was delivered sent %d", len(docs))
	}
}

func TestExpectWatchEveryStopsOnSignal(t *testing.T) {
	l := newLedger(t)
	raiseMany(l, 3, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
	cmd := exec.Command(tallyBin, "--dir", l.dir, "watch", "--every", "20ms", "--now", "2026-09-01T00:30:00Z")
	cmd.Env = baseEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The signal comes once the three lapses are delivered, with the
	// timekeeper still sweeping every 20ms.
	var stdout bytes.Buffer
	lines, read := make(chan struct{}, 16), make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			stdout.WriteString(sc.Text() + "\n")
			select {
			case lines <- struct{}{}:
			default: // more than it can hold: counted below
			}
		}
	}()
	for i := 0; i < 3; i++ {
		select {
		case <-lines:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("watch delivered %d lapses in 10s, want 3", i)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { <-read; done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watch after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("watch did not stop on SIGTERM")
	}
	if got := len(jsonLines(t, stdout.String())); got != 3 {
		t.Fatalf("delivered %d lapses, want 3", got)
	}
}

func TestPromiseLadderThroughTheBinary(t *testing.T) {
	l := newLedger(t)
	// Every sweep's instant is in the past: the timekeeper refuses to
	// record at an instant ahead of the clock.
	deadline := time.Now().UTC().Add(-6 * time.Hour).Truncate(time.Second)
	at := func(d time.Duration) string { return deadline.Add(d).Format(time.RFC3339) }
	l.mustAs("reviewer", "promise", "review the schema", "--id", "p1", "--to", "author", "--until", deadline.Format(time.RFC3339))
	logBefore := l.logBytes()
	notices := func(now string) []string {
		t.Helper()
		return keysOf(l.watchOnce(now))
	}
	check := func(got []string, want ...string) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("notices %v, want %v", got, want)
		}
	}
	check(notices(at(-time.Minute)))
	check(notices(at(time.Second)), "ntc:p1:h1:r0")
	check(notices(at(2 * time.Second)))
	check(notices(at(16*time.Minute)), "ntc:p1:h1:r1")
	docs := l.watchOnce(at(31 * time.Minute))
	check(keysOf(docs), "ntc:p1:h1:r2", "ntc:p1:h1:r3")
	if docs[1]["to"] != "creditor" || docs[1]["recipient"] != "author" || docs[0]["recipient"] != "reviewer" {
		t.Fatalf("escalation: %v", docs)
	}
	check(notices(at(2 * time.Hour)))
	if !bytes.Equal(logBefore, l.logBytes()) {
		t.Fatal("sweeps over promises changed the ledger's bytes")
	}
	// An amend starts a fresh ladder; a resolve stops it.
	l.mustAs("reviewer", "amend", "p1", "--until", at(3*time.Hour))
	check(notices(at(3*time.Hour+time.Second)), "ntc:p1:h2:r0")
	l.mustAs("reviewer", "resolve", "p1", "--satisfied", "--evidence", "https://example.org/r/1")
	check(notices(at(5 * time.Hour)))
}

func TestWatchWebhookRetriesUntilDelivered(t *testing.T) {
	var mu sync.Mutex
	var keys []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, r.Header.Get("Idempotency-Key"))
		if len(keys) <= 2 {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	srv.Start()
	defer srv.Close()
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("server at %s", srv.URL)
	}
	l := newLedger(t)
	raiseMany(l, 1, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
	r := l.run("watch", "--once", "--now", "2026-09-01T00:10:00Z", "--webhook", srv.URL, "--webhook-backoff", "10ms", "--webhook-attempts", "5")
	if r.code != 0 {
		t.Fatal(r)
	}
	lapseID := decode(t, l.must("lapses", "--json"))["lapses"].([]any)[0].(map[string]any)["lapseId"].(string)
	mu.Lock()
	got := fmt.Sprint(keys)
	mu.Unlock()
	if got != fmt.Sprint([]string{lapseID, lapseID, lapseID}) {
		t.Fatalf("attempts carried %s, want the lapse id %s three times", got, lapseID)
	}
	// Delivered and journaled: a later sweep posts nothing.
	l.run("watch", "--once", "--now", "2026-09-01T00:20:00Z", "--webhook", srv.URL)
	mu.Lock()
	defer mu.Unlock()
	if len(keys) != 3 {
		t.Fatalf("%d posts after delivery", len(keys))
	}
}

func TestWatchExecDelivery(t *testing.T) {
	l := newLedger(t)
	raiseMany(l, 2, time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC))
	sink := filepath.Join(t.TempDir(), "sink.jsonl")
	r := l.run("watch", "--once", "--now", "2026-09-01T00:10:00Z", "--exec", "cat >> "+sink)
	if r.code != 0 || r.out != "" {
		t.Fatal(r)
	}
	b, err := os.ReadFile(sink)
	if err != nil {
		t.Fatal(err)
	}
	if docs := jsonLines(t, string(b)); len(docs) != 2 || docs[0]["kind"] != "lapse" {
		t.Fatalf("exec sink got %s", b)
	}
	// A failing command leaves the lapse undelivered: exit 1, retried later.
	raiseMany2 := func() {
		l.mustAs(agent, "expect", "raise", "--id", "late", "--kind", "k", "--subject", "s:late", "--fact-key", "f", "--due", "2026-09-01T00:20:00Z", "--basis", "declared")
	}
	raiseMany2()
	if r := l.run("watch", "--once", "--now", "2026-09-01T00:30:00Z", "--exec", "exit 3"); r.code != 1 {
		t.Fatalf("failing exec: %v", r)
	}
	if docs := l.watchOnce("2026-09-01T00:31:00Z"); len(docs) != 1 {
		t.Fatalf("retry delivered %v", docs)
	}
}
