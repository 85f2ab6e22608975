package main

// export, verify and import as clients: the real `tally serve` on
// 127.0.0.1, and every answer compared, byte for byte, with the same verb
// run on the server's own ledger directory (or on a fresh local ledger).

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// logPath is the server's log of session default/default.
func (s *server) logPath() string {
	return filepath.Join(s.dir, "sessions", "default", "default", "log.jsonl")
}

func (s *server) logBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(s.logPath())
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return b
}

// same fails unless two runs exited alike and printed the same bytes.
func same(t *testing.T, what string, remote, local result) {
	t.Helper()
	if remote.code != local.code || remote.out != local.out || remote.err != local.err {
		t.Errorf("%s: remote and local differ\nremote: %v\nlocal: %v", what, remote, local)
	}
}

func TestRemoteExportAndVerifyMatchLocal(t *testing.T) {
	srv := startServer(t, "reviewer", "author")
	for _, args := range [][]string{
		{"promise", "hand back a reviewed schema", "--id", "desk/ship-91", "--to", "author", "--until", "2030-01-01T00:00:00Z"},
		{"promise", "then the changelog", "--id", "p2", "--to", "author", "--on", "desk/ship-91", "--until", "2030-01-02T00:00:00Z", "--meta", `{"lane":"docs"}`},
		{"amend", "desk/ship-91", "--until", "2030-01-01T06:00:00Z", "--reason", "nudge 1"},
		{"resolve", "desk/ship-91", "--satisfied", "--evidence", "https://example.org/r/91"},
	} {
		if r := srv.as(t, "reviewer", args...); r.code != 0 {
			t.Fatalf("%v", r)
		}
	}
	const T = "2030-01-01T12:00:00Z"
	reads := [][]string{
		{"export"}, {"export", "--format", "jsonl"}, {"export", "--format", "pinki"}, {"export", "--format", "pinki", "--now", T},
		{"export", "--format", "json", "--now", T}, {"verify"}, {"verify", "--json"},
	}
	for _, args := range reads {
		r, l := srv.as(t, "author", args...), srv.local(t, args...)
		if r.code != 0 {
			t.Fatalf("%q: %v", args, r)
		}
		same(t, strings.Join(args, " "), r, l)
	}
	if r := srv.as(t, "author", "export", "--format", "jsonl"); r.out != string(srv.logBytes(t)) {
		t.Errorf("remote export --format jsonl is not the server's log:\n%s", r.out)
	}

	// Damage line 2 on the server's disk: remote verify exits 1 naming the
	// line as the local verb does; the log is named by its path under the
	// server's ledger directory instead of where the server keeps it.
	orig := srv.logBytes(t)
	lines := bytes.SplitAfter(bytes.Clone(orig), []byte{'\n'})
	i := bytes.Index(lines[1], []byte("changelog"))
	lines[1][i] ^= 0x01
	damaged := bytes.Join(lines, nil)
	if err := os.WriteFile(srv.logPath(), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	local := func(s string) string { return strings.ReplaceAll(s, srv.dir+string(filepath.Separator), "") }
	for _, args := range [][]string{{"verify"}, {"verify", "--json"}, {"--session", "default/default", "verify"}, {"--session", "default/default", "verify", "--json"}} {
		r, l := srv.as(t, "author", args...), srv.local(t, args...)
		l.out, l.err = local(l.out), local(l.err)
		if r.code != 1 || !lineRef(2).MatchString(r.out+r.err) {
			t.Errorf("%q on a damaged log: want exit 1 naming line 2: %v", args, r)
		}
		same(t, strings.Join(args, " ")+" on a damaged log", r, l)
	}
	if r := srv.as(t, "author", "--session", "default/default", "verify"); !strings.Contains(r.err, "tally: sessions/default/default/log.jsonl: line 2: ") || strings.Contains(r.err, srv.dir) {
		t.Errorf("remote verify names the log by the server's path: %v", r)
	}
	for _, f := range []string{"jsonl", "pinki"} {
		r, l := srv.as(t, "author", "export", "--format", f), srv.local(t, "export", "--format", f)
		if r.code != 1 || l.code != 1 || r.out != "" || !lineRef(2).MatchString(r.err) || !lineRef(2).MatchString(l.err) {
			t.Errorf("export --format %s of a damaged log: want exit 1 naming line 2 and nothing exported\nremote: %v\nlocal: %v", f, r, l)
		}
	}
	if !bytes.Equal(srv.logBytes(t), damaged) {
		t.Fatal("a read changed the damaged log")
	}
	if err := os.WriteFile(srv.logPath(), orig, 0o644); err != nil {
		t.Fatal(err)
	}
	r, l := srv.as(t, "author", "verify"), srv.local(t, "verify")
	same(t, "verify of the restored log", r, l)
	if r.code != 0 {
		t.Errorf("verify of the restored log: %v", r)
	}
}

func TestRemoteImportMatchesLocal(t *testing.T) {
	srv := startServer(t, "boss=admin", "agent")
	loc := newLedger(t)
	src := writeFile(t, "ledger.jsonl", pinkiLedger)

	// One bad line refuses the whole import, naming it, both ways, and
	// nothing is appended.
	bad := writeFile(t, "bad.jsonl", slices.Insert(slices.Clone(pinkiLedger), 2, `{"ts":"2026-08-28T20:10:00Z","type":"promise",`))
	for _, extra := range [][]string{nil, {"--json"}} {
		args := append([]string{"import", bad}, extra...)
		r, l := srv.as(t, "boss", args...), loc.run(args...)
		if r.code != 2 || !lineRef(3).MatchString(r.err) {
			t.Errorf("%q: want exit 2 naming line 3: %v", args, r)
		}
		same(t, strings.Join(args, " "), r, l)
	}
	if r := srv.as(t, "boss", "import", filepath.Join(t.TempDir(), "missing.jsonl")); r.code != 1 || !strings.Contains(r.err, "no such file") {
		t.Errorf("import of a missing file: %v", r)
	}

	// A token of another role is refused and appends nothing.
	r := srv.as(t, "agent", "import", src)
	if r.code != 1 || !strings.Contains(r.err, "only an admin-role token imports") {
		t.Errorf("import by an agent token: %v", r)
	}
	if b := srv.logBytes(t); len(b) != 0 {
		t.Fatalf("refused imports appended to the server's log:\n%s", b)
	}

	// The admin's import prints what the local import prints, and the
	// server's pinki export is the input, line for line, less the record
	// of a type tally does not fold.
	r, l := srv.as(t, "boss", "import", src), loc.run("import", src)
	if r.code != 0 || !strings.Contains(r.out, "imported 12 record(s)") {
		t.Fatalf("import by an admin token: %v", r)
	}
	same(t, "import", r, l)
	want := strings.Join(knownLines(), "\n") + "\n"
	pinki := srv.as(t, "agent", "export", "--format", "pinki")
	if pinki.code != 0 || pinki.out != want {
		t.Errorf("remote pinki export after the import:\n got %s\nwant %s", pinki.out, want)
	}
	same(t, "export --format pinki after the import", pinki, loc.run("export", "--format", "pinki"))
	for _, args := range [][]string{{"export", "--format", "pinki"}, {"export", "--format", "jsonl"}, {"verify"}, {"verify", "--json"}} {
		same(t, strings.Join(args, " ")+" of the imported log", srv.as(t, "agent", args...), srv.local(t, args...))
	}

	// From stdin, with --json, into another session.
	stdin := strings.Join(pinkiLedger, "\n")
	r = run(t, runOpts{stdin: stdin, env: []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens["boss"]}}, "--session", "default/piped", "import", "-", "--json")
	l = newLedger(t).runWith(runOpts{stdin: stdin}, "import", "-", "--json")
	if r.code != 0 {
		t.Fatalf("import - --json: %v", r)
	}
	same(t, "import - --json", r, l)
}

// A remote export that meets damage after its first bytes went out still
// exits 1 naming the line, as the local export does.
func TestRemoteExportOfALongDamagedLog(t *testing.T) {
	srv := startServer(t, "boss=admin")
	lines := make([]string, 500)
	for i := range lines {
		lines[i] = fmt.Sprintf(`{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"p%d","promise":"promise number %d, with words enough to make the line long","by":"a","to":"b","until":"2026-08-31T12:00:00Z"}`, i+1, i+1)
	}
	if r := srv.as(t, "boss", "import", writeFile(t, "long.jsonl", lines)); r.code != 0 {
		t.Fatalf("import: %v", r)
	}
	b := srv.logBytes(t)
	at := bytes.Index(b, []byte(`"promise number 490,`)) + 3
	b[at] ^= 0x01
	if err := os.WriteFile(srv.logPath(), b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"jsonl", "pinki"} {
		r, l := srv.as(t, "boss", "export", "--format", f), srv.local(t, "export", "--format", f)
		if r.code != 1 || !lineRef(490).MatchString(r.err) || strings.Contains(r.out, `"p490"`) || l.code != 1 || !lineRef(490).MatchString(l.err) {
			t.Errorf("export --format %s of a log damaged at line 490: want exit 1 naming it\nremote: exit %d, %d bytes out, stderr %s\nlocal: %v", f, r.code, len(r.out), r.err, l)
		}
	}
}
