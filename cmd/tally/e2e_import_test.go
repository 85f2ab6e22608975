package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// pinkiLedger is a pinki ledger in pinki's exact line shapes: the seed's
// worked lifecycle (with meta), a foreign id, every resolve kind, a known
// record with a field tally does not know, and a record of a type tally
// does not know.
var pinkiLedger = []string{
	`{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"pnk_0c2b77","promise":"draft the schema","by":"…/author","to":"…/reviewer","until":"2026-08-31T12:00:00Z"}`,
	`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"desk/ship-91","promise":"hand back a reviewed schema","by":"…/reviewer","to":"…/author","on":"pnk_0c2b77","until":"2026-09-01T17:00:00Z"}`,
	`{"ts":"2026-08-30T09:00:00Z","type":"resolve","promise":"pnk_0c2b77","as":"satisfied","by":"…/author","evidence":["https://example.org/drafts/v1","https://example.org/drafts/v1.diff"]}`,
	`{"ts":"2026-09-01T17:12:00Z","type":"amend","promise":"desk/ship-91","by":"…/reviewer","until":"2026-09-01T18:00:00Z","reason":"nudge 1","meta":{"rung":1}}`,
	`{"ts":"2026-09-01T18:40:00Z","type":"assess","promise":"desk/ship-91","state":"violated","observer":"…/author","note":"deadline passed, nothing delivered","meta":{"seat":"desk"}}`,
	`{"ts":"2026-09-01T19:00:00Z","type":"nudge","promise":"desk/ship-91","rung":2}`,
	`{"ts":"2026-09-02T09:40:00Z","type":"resolve","promise":"desk/ship-91","as":"satisfied","by":"…/reviewer","evidence":["https://example.org/reviews/91"],"meta":{"seat":"reviewer"}}`,
	`{"ts":"2026-09-02T10:00:00Z","type":"promise","id":"pnk_4f3a91","promise":"write the release notes","by":"a","to":"b","until":"2026-09-05T00:00:00Z","task":"a2a-task-9c1f0e","meta":{"src":"pinki","tags":["x","y"]}}`,
	`{"ts":"2026-09-02T10:01:00Z","type":"resolve","promise":"pnk_4f3a91","as":"cancelled","by":"a","reason":"superseded by pnk_88de10"}`,
	`{"ts":"2026-09-02T10:02:00Z","type":"promise","id":"pnk_88de10","promise":"say \"hi\" \\ café ☕","by":"a","to":"b","until":"2026-09-03T00:00:00.5Z","provenance":"v0.2"}`,
	`{"ts":"2026-09-02T10:03:00Z","type":"promise","id":"pnk_1","promise":"let go","by":"a","to":"b","until":"2026-09-06T00:00:00Z"}`,
	`{"ts":"2026-09-02T10:04:00Z","type":"resolve","promise":"pnk_1","as":"released","by":"b"}`,
}

func writeFile(t testing.TB, name string, lines []string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// knownLines is pinkiLedger without the record of an unknown type.
func knownLines() []string {
	var out []string
	for _, s := range pinkiLedger {
		if !strings.Contains(s, `"type":"nudge"`) {
			out = append(out, s)
		}
	}
	return out
}

func TestE2EImportExportPinki(t *testing.T) {
	l := newLedger(t)
	src := writeFile(t, "ledger.jsonl", pinkiLedger)
	r := l.run("import", src)
	if r.code != 0 || !strings.Contains(r.out, "imported 12 record(s)") {
		t.Fatalf("import: %v", r)
	}
	if !strings.Contains(r.err, "warning") || !strings.Contains(r.err, `"nudge"`) || !lineRef(6).MatchString(r.err) {
		t.Errorf("import did not warn about the unknown type on line 6: %q", r.err)
	}

	// pinki export: every promise-family line byte-identical, in order.
	got := strings.Split(strings.TrimSuffix(l.must("export", "--format", "pinki"), "\n"), "\n")
	if want := knownLines(); !slices.Equal(got, want) {
		t.Errorf("pinki export differs from the input:\n got %q\nwant %q", got, want)
	}
	// The unknown record is kept in the log, byte for byte, never dropped.
	lines := l.logLines()
	if len(lines) != len(pinkiLedger) {
		t.Fatalf("log has %d lines, imported %d", len(lines), len(pinkiLedger))
	}
	for i, ln := range lines {
		if string(body(t, ln)) != pinkiLedger[i] {
			t.Errorf("log line %d body:\n got %s\nwant %s", i+1, body(t, ln), pinkiLedger[i])
		}
		if envelopeSeq(t, ln) != uint64(i+1) {
			t.Errorf("log line %d has seq %d", i+1, envelopeSeq(t, ln))
		}
	}
	// verify reports the unknown type and passes; read verbs warn once.
	r = l.run("--session", "default/default", "verify")
	if r.code != 0 || !strings.Contains(r.out, `"nudge"`) || !strings.Contains(r.out, "ok: 12 line(s)") {
		t.Errorf("verify: %v", r)
	}
	v := decode(t, l.must("--session", "default/default", "verify", "--json"))
	if unk := v["unknown"].([]any); v["whole"] != true || len(unk) != 1 || unk[0].(map[string]any)["type"] != "nudge" {
		t.Errorf("verify --json: %v", v)
	}
	r = l.run("ls", "--all")
	if r.code != 0 || strings.Count(r.err, "warning") != 1 || !strings.Contains(r.err, "nudge") {
		t.Errorf("ls over an unknown type: %v", r)
	}

	// The fold of the seed's lifecycle.
	now := "2026-09-02T12:00:00Z"
	_, ps := promisesOf(t, l.must("ls", "--all", "--json", "--now", now))
	ship := ps["desk/ship-91"]
	if ship["state"] != "satisfied" || len(ship["horizons"].([]any)) != 2 || ship["until"] != "2026-09-01T18:00:00Z" || len(ship["assessments"].([]any)) != 1 {
		t.Errorf("desk/ship-91: %v", ship)
	}
	if p := ps["pnk_0c2b77"]; p["state"] != "satisfied" || len(p["evidence"].([]any)) != 2 {
		t.Errorf("pnk_0c2b77: %v", p)
	}
	if p := ps["pnk_4f3a91"]; p["state"] != "cancelled" || p["reason"] != "superseded by pnk_88de10" || p["task"] != "a2a-task-9c1f0e" || p["meta"] == nil {
		t.Errorf("pnk_4f3a91: %v", p)
	}
	if p := ps["pnk_1"]; p["state"] != "released" {
		t.Errorf("pnk_1: %v", p)
	}
	if p := ps["pnk_88de10"]; p["state"] != "owed" || p["overdue"] != false || p["promise"] != `say "hi" \ café ☕` {
		t.Errorf("pnk_88de10: %v", p)
	}
	if _, ps := promisesOf(t, l.must("ls", "--overdue", "--json", "--now", "2026-09-03T00:00:01Z")); ps["pnk_88de10"] == nil {
		t.Errorf("pnk_88de10 not overdue after its deadline: %v", ps)
	}

	// Writes after an import: the foreign id works with every verb.
	l.must("promise", "follow-up", "--as", "…/reviewer", "--to", "…/author", "--on", "desk/ship-91", "--until", "2h", "--id", "desk/ship-92")
	if s := decode(t, l.must("show", "desk/ship-92", "--json"))["promise"].(map[string]any); s["state"] != "owed" {
		t.Errorf("desk/ship-92 on a satisfied foreign id: %v", s)
	}
	if r := l.run("promise", "dup", "--as", "a", "--to", "b", "--until", "2h", "--id", "desk/ship-91"); r.code != 1 || !namesField(strings.TrimPrefix(strings.TrimSpace(r.err), "tally: "), "id") {
		t.Errorf("an imported id is not taken: %v", r)
	}

	// Round trips: the pinki export, and tally's own jsonl export (with
	// envelopes), each imported into a fresh ledger, export the same lines.
	pk := writeFile(t, "pk.jsonl", strings.Split(strings.TrimSuffix(l.must("export", "--format", "pinki"), "\n"), "\n"))
	jl := writeFile(t, "jl.jsonl", strings.Split(strings.TrimSuffix(l.must("export", "--format", "jsonl"), "\n"), "\n"))
	want := l.must("export", "--format", "pinki")
	for _, f := range []string{pk, jl} {
		l2 := newLedger(t)
		l2.must("import", f)
		if got := l2.must("export", "--format", "pinki"); got != want {
			t.Errorf("round trip through %s:\n got %s\nwant %s", filepath.Base(f), got, want)
		}
	}
	// Import from stdin.
	l3 := newLedger(t)
	if r := l3.runWith(runOpts{stdin: strings.Join(pinkiLedger, "\n")}, "import", "-", "--json"); r.code != 0 {
		t.Fatalf("import -: %v", r)
	} else if d := decode(t, r.out); d["appended"].(interface{ String() string }).String() != "12" || d["unknown"].(interface{ String() string }).String() != "1" {
		t.Errorf("import --json: %s", r.out)
	}
}

// TestE2EImportRefusesBadLine: one bad line refuses the whole import, naming
// its line number, and appends nothing.
func TestE2EImportRefusesBadLine(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "already here", "--as", "a", "--to", "b", "--until", "2h", "--id", "here")
	good := knownLines()
	bad := []struct {
		name string
		line string
	}{
		{"not JSON", `{"ts":"2026-08-28T20:10:00Z","type":"promise",`},
		{"not an object", `["promise"]`},
		{"bad until", `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"x1","promise":"t","by":"a","to":"b","until":"next week"}`},
		{"bad ts", `{"ts":"yesterday","type":"promise","id":"x1","promise":"t","by":"a","to":"b","until":"2026-09-01T17:00:00Z"}`},
		{"evidence not strings", `{"ts":"2026-08-30T09:00:00Z","type":"resolve","promise":"pnk_0c2b77","as":"satisfied","by":"a","evidence":[1]}`},
		{"meta not an object", `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"x1","promise":"t","by":"a","to":"b","until":"2026-09-01T17:00:00Z","meta":[1]}`},
		{"field twice", `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"x1","id":"x2","promise":"t","by":"a","to":"b","until":"2026-09-01T17:00:00Z"}`},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			for _, at := range []int{0, 4, len(good)} {
				lines := slices.Insert(slices.Clone(good), at, b.line)
				f := writeFile(t, "bad.jsonl", lines)
				before := l.logBytes()
				r := l.run("import", f)
				if r.code == 0 || !lineRef(at+1).MatchString(r.err) {
					t.Errorf("bad line %d: want a refusal naming line %d: %v", at+1, at+1, r)
				}
				if !slices.Equal(before, l.logBytes()) {
					t.Fatalf("a refused import appended to the log")
				}
			}
		})
	}
	if r := l.run("import", writeFile(t, "empty.jsonl", []string{""})); r.code == 0 {
		t.Errorf("empty import accepted: %v", r)
	}
	if r := l.run("import", filepath.Join(t.TempDir(), "missing.jsonl")); r.code != 1 {
		t.Errorf("missing file: %v", r)
	}
	if out := l.must("verify"); !strings.Contains(out, "ok: 1 line(s)") {
		t.Errorf("verify: %s", out)
	}
}
