package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestE2EInitAndDirResolution: init creates a ledger; --dir, TALLY_DIR and
// the nearest .tally/ walking up all find it.
func TestE2EInitAndDirResolution(t *testing.T) {
	root := t.TempDir()
	r := run(t, runOpts{cwd: root}, "init")
	if r.code != 0 || !strings.Contains(r.out, "log format v1") {
		t.Fatalf("init in cwd: %v", r)
	}
	if _, err := os.Stat(filepath.Join(root, ".tally", "tally.json")); err != nil {
		t.Fatalf("init made no .tally marker: %v", err)
	}
	if r := run(t, runOpts{cwd: root}, "init"); r.code != 0 {
		t.Fatalf("init is not idempotent: %v", r)
	}
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	r = run(t, runOpts{cwd: sub}, "promise", "walk up", "--as", "a", "--to", "b", "--until", "2h", "--id", "w1")
	if r.code != 0 || strings.TrimSpace(r.out) != "w1" {
		t.Fatalf("promise from a subdirectory: %v", r)
	}
	if _, err := os.Stat(filepath.Join(root, ".tally", "sessions", "default", "default", "log.jsonl")); err != nil {
		t.Fatalf("the write did not land in the nearest .tally: %v", err)
	}

	other := filepath.Join(t.TempDir(), "envledger")
	if r := run(t, runOpts{env: []string{"TALLY_DIR=" + other}}, "init", "--json"); r.code != 0 {
		t.Fatalf("init with TALLY_DIR: %v", r)
	} else if m := decode(t, r.out); m["dir"] != other || m["schema_version"] == nil {
		t.Fatalf("init --json: %s", r.out)
	}
	r = run(t, runOpts{cwd: sub, env: []string{"TALLY_DIR=" + other, "TALLY_ACTOR=a"}}, "promise", "env", "--to", "b", "--until", "1h", "--id", "e1")
	if r.code != 0 {
		t.Fatalf("promise with TALLY_DIR and TALLY_ACTOR: %v", r)
	}
	// TALLY_DIR wins over the walk-up, --dir wins over TALLY_DIR.
	if r := run(t, runOpts{cwd: sub, env: []string{"TALLY_DIR=" + other}}, "show", "e1"); r.code != 0 {
		t.Fatalf("TALLY_DIR ledger lacks e1: %v", r)
	}
	if r := run(t, runOpts{cwd: sub, env: []string{"TALLY_DIR=" + other}}, "--dir", filepath.Join(root, ".tally"), "show", "w1"); r.code != 0 {
		t.Fatalf("--dir did not win over TALLY_DIR: %v", r)
	}
	// No ledger anywhere: exit 1 with advice.
	lonely := t.TempDir()
	if r := run(t, runOpts{cwd: lonely}, "ls"); r.code != 1 || !strings.Contains(r.err, "init") {
		t.Fatalf("ls without a ledger: %v", r)
	}
}

// TestE2EPromiseStdin: one JSON record on stdin, actor defaulting to by;
// unknown fields refused.
func TestE2EPromiseStdin(t *testing.T) {
	l := newLedger(t)
	in := `{"id":"s1","promise":"from stdin","by":"a","to":"b","until":"2030-01-01T00:00:00Z","task":"t-1","meta":{"k":[1,2]}}`
	r := l.runWith(runOpts{stdin: in}, "promise")
	if r.code != 0 || strings.TrimSpace(r.out) != "s1" {
		t.Fatalf("promise from stdin: %v", r)
	}
	m := decode(t, l.must("show", "s1", "--json"))["promise"].(map[string]any)
	if m["task"] != "t-1" || m["by"] != "a" || m["until"] != "2030-01-01T00:00:00Z" {
		t.Fatalf("stdin record not kept: %v", m)
	}
	if meta, _ := m["meta"].(map[string]any); meta == nil || meta["k"] == nil {
		t.Fatalf("meta lost: %v", m)
	}
	before := l.logBytes()
	for _, field := range []string{"priority", "deadline"} {
		r := l.runWith(runOpts{stdin: `{"promise":"x","by":"a","to":"b","until":"2h","` + field + `":"soon"}`}, "promise")
		if r.code != 2 || !strings.Contains(r.err, field) {
			t.Fatalf("unknown field %s: %v", field, r)
		}
	}
	if r := l.runWith(runOpts{stdin: `not json`}, "promise"); r.code != 2 {
		t.Fatalf("stdin not JSON: %v", r)
	}
	if r := l.runWith(runOpts{stdin: `{"promise":"x","by":"a","to":"b","until":"2h","promise":"y"}`}, "promise"); r.code != 2 || !strings.Contains(r.err, "twice") {
		t.Fatalf("field twice: %v", r)
	}
	if !slices.Equal(before, l.logBytes()) {
		t.Fatal("a refused stdin record changed the log")
	}
}

// lifecycle builds the seed's worked lifecycle with real commands.
func lifecycle(t *testing.T, l *led) {
	t.Helper()
	const rev, auth = "https://example.org/agents/reviewer", "https://example.org/agents/author"
	l.must("promise", "draft the schema", "--as", auth, "--to", rev, "--until", "2030-08-31T12:00:00Z", "--id", "pnk_0c2b77")
	r := l.run("promise", "hand back a reviewed schema", "--as", rev, "--to", auth, "--on", "pnk_0c2b77", "--until", "2030-09-01T17:00:00Z", "--id", "desk/ship-91", "--task", "a2a-task-9c1f0e")
	if r.code != 0 || strings.TrimSpace(r.out) != "desk/ship-91" || r.err != "" {
		t.Fatalf("declare: %v", r)
	}
	l.must("resolve", "pnk_0c2b77", "--satisfied", "--evidence", "https://example.org/drafts/v1", "https://example.org/drafts/v1.diff", "--evidence", "https://example.org/drafts/v1.pdf", "--as", auth)
	out := l.must("amend", "desk/ship-91", "--until", "2030-09-01T18:00:00Z", "--reason", "nudge 1", "--meta", `{"rung":1}`, "--as", rev)
	if !strings.Contains(out, "2030-09-01T18:00:00Z") || !strings.Contains(out, "2030-09-01T17:00:00Z") {
		t.Fatalf("amend output: %s", out)
	}
	l.must("assess", "desk/ship-91", "--violated", "--observer", auth, "--note", "deadline passed, nothing delivered", "--meta", `{"seat":"desk"}`, "--as", auth)
	l.must("resolve", "desk/ship-91", "--satisfied", "--evidence", "https://example.org/reviews/91", "--meta", `{"seat":"reviewer"}`, "--as", rev)
	// cancelled by the debtor, released by the creditor, a promise to oneself, one overdue.
	l.must("promise", "to cancel", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "c1")
	l.must("resolve", "c1", "--cancelled", "--reason", "superseded by c2", "--as", "a")
	l.must("promise", "to release", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "r1")
	l.must("resolve", "r1", "--released", "--reason", "not needed", "--as", "b")
	l.must("promise", "note to self", "--as", "a", "--to", "a", "--until", "2031-06-01T00:00:00Z", "--id", "self1")
	l.must("promise", "late one", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "late1", "--json")
}

const lifeNow = "2030-09-02T10:00:00Z"

// TestE2EEveryVerb walks every verb on one ledger.
func TestE2EEveryVerb(t *testing.T) {
	l := newLedger(t)
	lifecycle(t, l)

	// show --json: every documented field.
	doc := decode(t, l.must("show", "desk/ship-91", "--json", "--now", lifeNow))
	if doc["schema_version"] == nil || doc["now"] != lifeNow {
		t.Fatalf("show --json head: %v", doc)
	}
	p := doc["promise"].(map[string]any)
	for _, k := range []string{"id", "promise", "by", "to", "on", "task", "until", "horizons", "state", "overdue", "evidence", "reason", "assessments", "meta"} {
		if _, ok := p[k]; !ok {
			t.Errorf("show --json lacks %q: %v", k, p)
		}
	}
	if p["state"] != "satisfied" || p["on"] != "pnk_0c2b77" || p["task"] != "a2a-task-9c1f0e" || p["until"] != "2030-09-01T18:00:00Z" || p["overdue"] != false || p["reason"] != nil {
		t.Errorf("show --json values: %v", p)
	}
	if h := p["horizons"].([]any); len(h) != 2 || h[0] != "2030-09-01T17:00:00Z" || h[1] != "2030-09-01T18:00:00Z" {
		t.Errorf("horizons: %v", h)
	}
	if ev := p["evidence"].([]any); len(ev) != 1 || ev[0] != "https://example.org/reviews/91" {
		t.Errorf("evidence: %v", ev)
	}
	as := p["assessments"].([]any)
	if len(as) != 1 {
		t.Fatalf("assessments: %v", as)
	}
	a := as[0].(map[string]any)
	for _, k := range []string{"observer", "state", "note", "ts"} {
		if _, ok := a[k]; !ok {
			t.Errorf("assessment lacks %q: %v", k, a)
		}
	}
	if a["observer"] != "https://example.org/agents/author" || a["state"] != "violated" || a["note"] != "deadline passed, nothing delivered" {
		t.Errorf("assessment: %v", a)
	}
	d := decode(t, l.must("show", "pnk_0c2b77", "--json", "--now", lifeNow))["promise"].(map[string]any)
	if ev := d["evidence"].([]any); len(ev) != 3 || d["state"] != "satisfied" {
		t.Errorf("several evidence refs: %v", d)
	}
	c := decode(t, l.must("show", "c1", "--json"))["promise"].(map[string]any)
	if c["state"] != "cancelled" || c["reason"] != "superseded by c2" {
		t.Errorf("cancelled: %v", c)
	}
	rl := decode(t, l.must("show", "r1", "--json"))["promise"].(map[string]any)
	if rl["state"] != "released" {
		t.Errorf("released: %v", rl)
	}

	// show text: both records side by side.
	out := l.must("show", "desk/ship-91", "--now", lifeNow)
	for _, want := range []string{"desk/ship-91", "satisfied", "horizon 1", "horizon 2", "THE LEDGER", "OBSERVERS", "violated by https://example.org/agents/author", "evidence https://example.org/reviews/91"} {
		if !strings.Contains(out, want) {
			t.Errorf("show text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "\x1b[") {
		t.Errorf("colour on a pipe:\n%q", out)
	}

	// ls: --open (default), --overdue, --all, --by, --to, --json, --now.
	ids := func(args ...string) []string {
		t.Helper()
		got, _ := promisesOf(t, l.must(append([]string{"ls", "--json", "--now", lifeNow}, args...)...))
		return got
	}
	if got := ids(); !slices.Equal(got, []string{"self1", "late1"}) {
		t.Errorf("ls (open): %v", got)
	}
	if got := ids("--open"); !slices.Equal(got, []string{"self1", "late1"}) {
		t.Errorf("ls --open: %v", got)
	}
	if got := ids("--overdue"); !slices.Equal(got, []string{"late1"}) {
		t.Errorf("ls --overdue: %v", got)
	}
	if got := ids("--all"); !slices.Equal(got, []string{"pnk_0c2b77", "desk/ship-91", "c1", "r1", "self1", "late1"}) {
		t.Errorf("ls --all: %v", got)
	}
	if got := ids("--all", "--by", "a", "--to", "b"); !slices.Equal(got, []string{"c1", "r1", "late1"}) {
		t.Errorf("ls --all --by a --to b: %v", got)
	}
	if got := ids("--all", "--to", "https://example.org/agents/author"); !slices.Equal(got, []string{"desk/ship-91"}) {
		t.Errorf("ls --to: %v", got)
	}
	if got := ids("--overdue", "--now", "2029-12-31T23:59:59Z"); len(got) != 0 {
		t.Errorf("ls --overdue before the deadline: %v", got)
	}
	if got := ids("--overdue", "--now", "2030-01-01T00:00:00Z"); len(got) != 0 {
		t.Errorf("overdue must be strict (now > until): %v", got)
	}
	if r := l.run("ls", "--open", "--all"); r.code != 2 {
		t.Errorf("ls --open --all: %v", r)
	}
	if r := l.run("ls", "--now", "yesterday"); r.code != 2 || !strings.Contains(r.err, "now") {
		t.Errorf("ls --now yesterday: %v", r)
	}
	text := l.must("ls", "--overdue", "--now", lifeNow)
	if !strings.Contains(text, "late1") || !strings.Contains(text, "overdue") || !strings.Contains(text, "ID") {
		t.Errorf("ls text:\n%s", text)
	}

	// owed: overdue first; text and --json.
	ow := decode(t, l.must("owed", "--as", "a", "--json", "--now", lifeNow))
	list := ow["owed"].([]any)
	if ow["as"] != "a" || len(list) != 2 || list[0].(map[string]any)["id"] != "late1" || list[1].(map[string]any)["id"] != "self1" {
		t.Errorf("owed --json: %v", ow)
	}
	if out := l.must("owed", "--as", "a", "--now", lifeNow); !strings.Contains(out, "late1") || strings.Index(out, "late1") > strings.Index(out, "self1") {
		t.Errorf("owed text:\n%s", out)
	}
	if r := l.runWith(runOpts{env: []string{"TALLY_ACTOR=a"}}, "owed", "--now", lifeNow); r.code != 0 || !strings.Contains(r.out, "late1") {
		t.Errorf("owed with TALLY_ACTOR: %v", r)
	}

	// graph: text, dot, json.
	g := l.must("graph", "--now", lifeNow)
	if !strings.Contains(g, "desk/ship-91 (satisfied) on pnk_0c2b77") || !strings.Contains(g, "a → b") {
		t.Errorf("graph text:\n%s", g)
	}
	dot := l.must("graph", "--format", "dot", "--now", lifeNow)
	if !strings.HasPrefix(dot, "digraph") || !strings.Contains(dot, `"desk/ship-91" -> "pnk_0c2b77"`) {
		t.Errorf("graph dot:\n%s", dot)
	}
	gj := decode(t, l.must("graph", "--format", "json", "--now", lifeNow))
	edges := gj["edges"].([]any)
	if len(edges) != 1 || edges[0].(map[string]any)["from"] != "desk/ship-91" || len(gj["promises"].([]any)) != 6 || gj["parties"] == nil {
		t.Errorf("graph json: %v", gj)
	}
	if r := l.run("graph", "--format", "svg"); r.code != 2 {
		t.Errorf("graph --format svg: %v", r)
	}

	// export: jsonl is the log; pinki drops envelopes; json is states.
	jl := l.must("export", "--format", "jsonl")
	if jl != string(l.logBytes()) {
		t.Errorf("export jsonl differs from the log")
	}
	pk := strings.Split(strings.TrimSuffix(l.must("export", "--format", "pinki"), "\n"), "\n")
	lines := l.logLines()
	if len(pk) != len(lines) {
		t.Fatalf("export pinki has %d lines, log %d", len(pk), len(lines))
	}
	for i := range pk {
		if strings.Contains(pk[i], `"tally"`) || pk[i] != string(body(t, lines[i])) {
			t.Errorf("pinki line %d: %s", i+1, pk[i])
		}
	}
	if !strings.Contains(pk[4], `"meta":{"seat":"desk"}`) || !strings.HasSuffix(pk[4], `}}`) {
		t.Errorf("meta not last on the assess line: %s", pk[4])
	}
	ej, _ := promisesOf(t, l.must("export", "--format", "json", "--now", lifeNow))
	if len(ej) != 6 {
		t.Errorf("export json: %v", ej)
	}
	if r := l.run("export", "--format", "csv"); r.code != 2 {
		t.Errorf("export --format csv: %v", r)
	}

	// verify, version, completion (demo: TestE2EDemo).
	if out := l.must("verify"); !strings.Contains(out, "ok: 12 line(s)") {
		t.Errorf("verify: %s", out)
	}
	if v := decode(t, l.must("--session", "default/default", "verify", "--json")); v["whole"] != true {
		t.Errorf("verify --json: %v", v)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := run(t, runOpts{}, args...)
		if r.code != 0 || !strings.HasPrefix(r.out, "tally ") || !strings.Contains(r.out, "log format v1") {
			t.Errorf("%v: %v", args, r)
		}
	}
	if v := decode(t, run(t, runOpts{}, "version", "--json").out); v["version"] == nil || v["log_format"] == nil || v["schema_version"] == nil {
		t.Errorf("version --json: %v", v)
	}
	if r := run(t, runOpts{}, "completion", "bash"); r.code != 0 || !strings.Contains(r.out, "bash completion") {
		t.Errorf("completion bash: exit %d, %d bytes", r.code, len(r.out))
	}
	if r := run(t, runOpts{}, "no-such-verb"); r.code != 2 {
		t.Errorf("unknown verb: %v", r)
	}
}

// TestE2EDemo: `tally demo` walks the three families on its temporary
// ledger through real commands, each family reaching its end state, and
// ends with a whole chain.
func TestE2EDemo(t *testing.T) {
	r := run(t, runOpts{}, "demo")
	if r.code != 0 || r.err != "" {
		t.Fatalf("demo: %v", r)
	}
	// Each want is found after the one before it, so the story runs in order.
	rest := r.out
	for _, want := range []string{
		"$ tally show desk/ship-91\ndesk/ship-91  satisfied\n",
		"$ tally claim show C17\nC17  Validating\n",
		"  slot change: patch-a: behavior pass, review missing; patch-b: review pass, behavior missing\n",
		"C17: review on patch-a: fail",
		"C17: ValidationFailed\n",
		"note: C18 inherits the slots and checks of its predecessor C17",
		"C18: Satisfied\n",
		"\nC17    ValidationFailed ",
		"\nC18    Satisfied ",
		"$ tally watch --once\n",
		`"expectationId":"exp-depart","lapse":"overdue"`,
		"1 lapse(s), 0 withdrawal(s)",
		"satisfied exp-depart-2\n",
		"\nexp-depart    superseded  ",
		"\nexp-depart-2  satisfied   ",
	} {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("demo: %q missing, or out of order; after the last found:\n%s", want, rest)
		}
		rest = rest[i+len(want):]
	}
	last := strings.TrimRight(r.out, "\n")
	last = last[strings.LastIndex(last, "\n")+1:]
	if !strings.HasSuffix(r.out, "$ tally verify\n"+last+"\n") || !strings.HasPrefix(last, "default/default: ok: ") || !strings.HasSuffix(last, ", chain whole") {
		t.Fatalf("demo does not end with a whole chain: %q", last)
	}
}

// TestE2EWriteJSON: write verbs in --json mode print one document with the
// promise's view and warnings; an unknown antecedent is a warning, and the
// promise is conditional.
func TestE2EWriteJSON(t *testing.T) {
	l := newLedger(t)
	doc := decode(t, l.must("promise", "waits", "--as", "a", "--to", "b", "--until", "3d", "--on", "nope", "--id", "w1", "--json"))
	if doc["schema_version"] == nil || doc["seq"] == nil {
		t.Fatalf("promise --json: %v", doc)
	}
	p := doc["promise"].(map[string]any)
	if p["state"] != "conditional" || p["on"] != "nope" {
		t.Errorf("unknown antecedent: %v", p)
	}
	if w := doc["warnings"].([]any); len(w) != 1 || !strings.Contains(w[0].(string), "nope") {
		t.Errorf("warnings: %v", doc["warnings"])
	}
	// Text mode: the same warning on stderr, the id on stdout.
	r := l.run("promise", "waits too", "--as", "a", "--to", "b", "--until", "90m", "--on", "nope")
	if r.code != 0 || !strings.HasPrefix(r.out, "pnk_") || len(strings.TrimSpace(r.out)) != 10 || !strings.Contains(r.err, "warning") || !strings.Contains(r.err, "on:") {
		t.Fatalf("promise --on nope: %v", r)
	}
	if s := decode(t, l.must("show", strings.TrimSpace(r.out), "--json"))["promise"].(map[string]any); s["state"] != "conditional" {
		t.Errorf("state: %v", s)
	}
	// --by defaults to the actor; --until accepts 1d12h.
	l.must("promise", "as actor", "--as", "x", "--to", "y", "--until", "1d12h", "--id", "x1")
	if s := decode(t, l.must("show", "x1", "--json"))["promise"].(map[string]any); s["by"] != "x" {
		t.Errorf("--by default: %v", s)
	}
	// promise uses --by as the actor when no --as and no TALLY_ACTOR.
	l.must("promise", "by only", "--by", "z", "--to", "y", "--until", "2h", "--id", "z1")
	// a promise id of exactly 128 characters is fine.
	id128 := strings.Repeat("i", 128)
	if out := strings.TrimSpace(l.must("promise", "long id", "--as", "a", "--to", "b", "--until", "2h", "--id", id128)); out != id128 {
		t.Errorf("128-char id: %s", out)
	}
	for _, args := range [][]string{
		{"amend", "x1", "--until", "2030-01-01T00:00:00Z", "--as", "x", "--json"},
		{"assess", "x1", "--violated", "--as", "y", "--json"},
		{"resolve", "x1", "--released", "--as", "y", "--json"},
	} {
		doc := decode(t, l.must(args...))
		if doc["promise"].(map[string]any)["id"] != "x1" || doc["schema_version"] == nil {
			t.Errorf("%v: %v", args, doc)
		}
	}
}
