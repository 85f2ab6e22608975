package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// fiveLines makes a ledger of five promises written by the CLI.
func fiveLines(t *testing.T) *led {
	t.Helper()
	l := newLedger(t)
	for i := 1; i <= 5; i++ {
		l.must("promise", fmt.Sprintf("promise number %d", i), "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", fmt.Sprintf("p%d", i))
	}
	return l
}

func joinLines(lines [][]byte) []byte {
	return append(bytes.Join(lines, []byte{'\n'}), '\n')
}

// TestE2EDamageIsRefusedWithItsLine: a flipped byte anywhere makes every
// verb that reads that line exit 1 naming it, and writes append nothing.
func TestE2EDamageIsRefusedWithItsLine(t *testing.T) {
	l := fiveLines(t)
	orig := l.logBytes()
	lines := l.logLines()
	flips := []struct {
		name string
		at   func(line []byte) int
	}{
		{"text", func(ln []byte) int { return bytes.Index(ln, []byte("number")) + 2 }},
		{"hash", func(ln []byte) int { return len(ln) - 10 }},
		{"seq", func(ln []byte) int { return bytes.Index(ln, []byte(`"seq":`)) + 6 }},
		{"structure", func(ln []byte) int { return 0 }},
	}
	for k := 1; k <= 5; k++ {
		for _, f := range flips {
			if k != 3 && f.name != "text" {
				continue
			}
			t.Run(fmt.Sprintf("line %d %s", k, f.name), func(t *testing.T) {
				dam := slices.Clone(lines)
				ln := slices.Clone(dam[k-1])
				ln[f.at(ln)] ^= 0x01
				dam[k-1] = ln
				l.writeLog(joinLines(dam))
				defer l.writeLog(orig)
				damaged := l.logBytes()
				verbs := [][]string{{"--session", "default/default", "verify"}, {"ls"}, {"ls", "--all", "--json"}, {"show", "p1"}, {"owed", "--as", "a"}, {"graph"}, {"export", "--format", "pinki"},
					{"promise", "after damage", "--as", "a", "--to", "b", "--until", "2h"},
					{"resolve", "p1", "--released", "--as", "b"}}
				if k != 3 {
					verbs = verbs[:2]
				}
				for _, args := range verbs {
					r := l.run(args...)
					if r.code != 1 || !lineRef(k).MatchString(r.err) {
						t.Errorf("want exit 1 naming line %d: %v", k, r)
					}
					if !bytes.Equal(damaged, l.logBytes()) {
						t.Fatalf("%v changed a damaged log", args)
					}
				}
				if k == 3 {
					if v := decode(t, l.run("--session", "default/default", "verify", "--json").out); v["whole"] != false || !lineRef(3).MatchString(fmt.Sprint(v["error"])) {
						t.Errorf("verify --json: %v", v)
					}
					if r := l.run("ls", "--json"); r.code != 1 || decode(t, r.err)["code"] != "corrupt" {
						t.Errorf("ls --json on damage: %v", r)
					}
				}
			})
		}
	}
	if out := l.must("verify"); !strings.Contains(out, "ok: 5 line(s)") {
		t.Fatalf("restored log: %s", out)
	}
}

// TestE2ESequenceDamage: a deleted, duplicated, swapped or blank line is
// refused with its line number.
func TestE2ESequenceDamage(t *testing.T) {
	l := fiveLines(t)
	orig := l.logBytes()
	lines := l.logLines()
	cases := []struct {
		name string
		log  [][]byte
		line int
	}{
		{"middle line deleted", slices.Delete(slices.Clone(lines), 2, 3), 3},
		{"first line deleted", lines[1:], 1},
		{"line duplicated", slices.Insert(slices.Clone(lines), 2, lines[1]), 3},
		{"lines swapped", [][]byte{lines[0], lines[2], lines[1], lines[3], lines[4]}, 2},
		{"blank line inserted", slices.Insert(slices.Clone(lines), 3, []byte{}), 4},
		{"line from another ledger", func() [][]byte {
			o := newLedger(t)
			for i := 1; i <= 3; i++ {
				o.must("promise", fmt.Sprintf("another ledger's promise %d", i), "--as", "a", "--to", "b", "--until", "2h")
			}
			ol := o.logLines()
			return [][]byte{lines[0], lines[1], ol[2], lines[3], lines[4]}
		}(), 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l.writeLog(joinLines(tc.log))
			defer l.writeLog(orig)
			before := l.logBytes()
			for _, args := range [][]string{{"--session", "default/default", "verify"}, {"ls"}, {"promise", "x", "--as", "a", "--to", "b", "--until", "2h"}} {
				r := l.run(args...)
				if r.code != 1 || !lineRef(tc.line).MatchString(r.err) {
					t.Errorf("want exit 1 naming line %d: %v", tc.line, r)
				}
			}
			if !bytes.Equal(before, l.logBytes()) {
				t.Fatal("a damaged log was changed")
			}
		})
	}
}

// TestE2ETornTail: an incomplete final line fails verify ("incomplete"), is
// not read, and is cut by the next write with a warning; then verify passes.
func TestE2ETornTail(t *testing.T) {
	other := fiveLines(t).logLines()
	tails := map[string][]byte{
		"half a line":              other[0][:len(other[0])/2],
		"a whole line, no newline": other[0],
		"one byte":                 {'{'},
		"garbage":                  []byte("\x00\x00\xff partial"),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			l := fiveLines(t)
			orig := l.logBytes()
			want := l.must("ls", "--all", "--json", "--now", "2029-01-01T00:00:00Z")
			l.writeLog(append(slices.Clone(orig), tail...))
			r := l.run("--session", "default/default", "verify")
			if r.code != 1 || !strings.Contains(r.err, "incomplete") || !lineRef(6).MatchString(r.err) {
				t.Errorf("verify on a torn tail: %v", r)
			}
			if v := decode(t, l.run("--session", "default/default", "verify", "--json").out); v["whole"] != false || v["torn"] == nil {
				t.Errorf("verify --json on a torn tail: %v", v)
			}
			// Readers skip it and change nothing.
			if got := l.must("ls", "--all", "--json", "--now", "2029-01-01T00:00:00Z"); got != want {
				t.Errorf("ls over a torn tail:\n%s\nwant\n%s", got, want)
			}
			if !bytes.HasSuffix(l.logBytes(), tail) {
				t.Fatal("a read cut the torn tail")
			}
			// A refused write appends nothing; it may cut the crash's
			// leftover (it holds the lock), but then only with a warning.
			if r := l.run("promise", "dup", "--as", "a", "--to", "b", "--until", "2h", "--id", "p1"); r.code != 1 {
				t.Errorf("duplicate on a torn log: %v", r)
			} else if now := l.logBytes(); !bytes.Equal(now, orig) && !bytes.HasSuffix(now, tail) {
				t.Errorf("a refused write changed the log beyond its torn tail")
			} else if bytes.Equal(now, orig) && !strings.Contains(strings.ToLower(r.err), "torn") {
				t.Errorf("a refused write cut the torn tail without a warning: %v", r)
			}
			l.writeLog(append(slices.Clone(orig), tail...))
			// The next accepted write cuts it, with a warning.
			r = l.run("promise", "after the crash", "--as", "a", "--to", "b", "--until", "2h", "--id", "p6")
			if r.code != 0 || strings.TrimSpace(r.out) != "p6" || !strings.Contains(strings.ToLower(r.err), "torn") {
				t.Fatalf("write after a torn tail: %v", r)
			}
			after := l.logBytes()
			if !bytes.HasPrefix(after, orig) || bytes.Count(after, []byte{'\n'}) != 6 || after[len(after)-1] != '\n' {
				t.Fatalf("the torn tail was not cut back to the last whole line:\n%s", after)
			}
			if out := l.must("verify"); !strings.Contains(out, "ok: 6 line(s)") {
				t.Errorf("verify after the cut: %s", out)
			}
		})
	}
}

// readVerbs are read verbs whose output must be byte-identical for the same
// log and --now.
func readVerbs(now string) [][]string {
	return [][]string{
		{"ls", "--json", "--now", now},
		{"ls", "--all", "--json", "--now", now},
		{"show", "g-17", "--json", "--now", now},
		{"show", "g-2999", "--json", "--now", now},
		{"owed", "--as", "d3", "--json", "--now", now},
		{"graph", "--format", "json", "--now", now},
	}
}

// generated is a pinki ledger of n promises with amends, resolves and
// assessments, deterministic in seed.
func generated(n int, seed string) []string {
	var out []string
	for i := range n {
		id := fmt.Sprintf("g-%d", i)
		on := ""
		if i%7 == 3 {
			on = fmt.Sprintf(`,"on":"g-%d"`, i-1)
		}
		out = append(out, fmt.Sprintf(`{"ts":"2026-09-01T%02d:%02d:00Z","type":"promise","id":"%s","promise":"%s task %d","by":"d%d","to":"c%d"%s,"until":"2026-09-%02dT12:00:00Z"}`,
			i/60%24, i%60, id, seed, i, i%5, i%3, on, 2+i%20))
		switch i % 10 {
		case 1:
			out = append(out, fmt.Sprintf(`{"ts":"2026-09-02T00:00:00Z","type":"amend","promise":"%s","by":"d%d","until":"2026-09-25T12:00:00Z","reason":"nudge"}`, id, i%5))
		case 2:
			out = append(out, fmt.Sprintf(`{"ts":"2026-09-02T00:00:00Z","type":"resolve","promise":"%s","as":"satisfied","by":"d%d","evidence":["e://%d"]}`, id, i%5, i))
		case 4:
			out = append(out, fmt.Sprintf(`{"ts":"2026-09-02T00:00:00Z","type":"assess","promise":"%s","state":"violated","observer":"o","note":"late"}`, id))
		case 5:
			out = append(out, fmt.Sprintf(`{"ts":"2026-09-02T00:00:00Z","type":"resolve","promise":"%s","as":"released","by":"c%d"}`, id, i%3))
		}
	}
	return out
}

// TestE2EDeterminismAndCheckpoints: read verbs give byte-identical output
// across runs, with the checkpoint present, deleted, rebuilt, corrupt,
// stale, or taken from another ledger.
func TestE2EDeterminismAndCheckpoints(t *testing.T) {
	l := newLedger(t)
	src := generated(3000, "alpha")
	l.must("import", writeFile(t, "gen.jsonl", src))
	cp, err := os.ReadFile(l.cpPath())
	if err != nil {
		t.Fatalf("no checkpoint after importing %d records: %v", len(src), err)
	}
	const now = "2026-09-10T00:00:00Z"
	outputs := func(stage string) []string {
		t.Helper()
		var outs []string
		for _, args := range readVerbs(now) {
			r := l.run(args...)
			if r.code != 0 {
				t.Fatalf("%s: %v", stage, r)
			}
			outs = append(outs, r.out)
		}
		return outs
	}
	check := func(stage string, want []string) {
		t.Helper()
		got := outputs(stage)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %v differs (%d vs %d bytes)", stage, readVerbs(now)[i], len(got[i]), len(want[i]))
			}
		}
	}
	want := outputs("first run")
	if _, ps := promisesOf(t, want[1]); len(ps) != 3000 {
		t.Fatalf("ls --all: %d promises", len(ps))
	}
	check("second run", want)

	if err := os.Remove(l.cpPath()); err != nil {
		t.Fatal(err)
	}
	check("checkpoint deleted", want)
	if _, err := os.Stat(l.cpPath()); err != nil {
		t.Errorf("the checkpoint was not rebuilt by a read: %v", err)
	}
	check("checkpoint rebuilt", want)

	for name, mangle := range map[string]func([]byte) []byte{
		"flipped byte in the middle": func(b []byte) []byte { b = slices.Clone(b); b[len(b)/2] ^= 0x40; return b },
		"truncated":                  func(b []byte) []byte { return b[:len(b)/3] },
		"garbage":                    func([]byte) []byte { return []byte("TALLYCK1 not really") },
	} {
		if err := os.WriteFile(l.cpPath(), mangle(cp), 0o644); err != nil {
			t.Fatal(err)
		}
		check("checkpoint "+name, want)
	}

	// A checkpoint of another ledger (same shape, other content) is ignored.
	l2 := newLedger(t)
	l2.must("import", writeFile(t, "gen2.jsonl", generated(3000, "bravo")))
	cp2, err := os.ReadFile(l2.cpPath())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.cpPath(), cp2, 0o644); err != nil {
		t.Fatal(err)
	}
	check("checkpoint of another ledger", want)

	// A stale (older) checkpoint is used and the tail folded after it.
	if err := os.WriteFile(l.cpPath(), cp, 0o644); err != nil {
		t.Fatal(err)
	}
	l.must("resolve", "g-17", "--satisfied", "--evidence", "late://17", "--as", "d2")
	l.must("amend", "g-2999", "--until", "2026-09-30T00:00:00Z", "--as", "d4")
	want2 := outputs("after two writes")
	if slices.Equal(want, want2) {
		t.Fatal("writes changed nothing")
	}
	if err := os.WriteFile(l.cpPath(), cp, 0o644); err != nil {
		t.Fatal(err)
	}
	check("stale checkpoint", want2)
	if err := os.Remove(l.cpPath()); err != nil {
		t.Fatal(err)
	}
	check("no checkpoint after writes", want2)
	if out := l.must("verify"); !strings.Contains(out, fmt.Sprintf("ok: %d line(s)", len(src)+2)) {
		t.Errorf("verify: %s", out)
	}

	// Damage before the checkpoint is still found by verify and export,
	// which read the log itself.
	lines := l.logLines()
	lines[9] = bytes.Replace(slices.Clone(lines[9]), []byte(`"ts":"2026`), []byte(`"ts":"2027`), 1)
	l.writeLog(joinLines(lines))
	for _, args := range [][]string{{"--session", "default/default", "verify"}, {"export", "--format", "jsonl"}} {
		if r := l.run(args...); r.code != 1 || !lineRef(10).MatchString(r.err) {
			t.Errorf("%v on damage before the checkpoint: %v", args, r)
		}
	}
}
