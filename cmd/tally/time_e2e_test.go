package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A deadline outside 1678–2262 keeps its value through the real binary: a
// year-9999 "never" is not overdue (it used to show as 1816 and be overdue
// at once), a year-1000 one is, and export gives back what was written.
func TestE2EFarDeadlines(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "never", "--as", "a", "--to", "b", "--until", "9999-12-31T00:00:00Z", "--id", "never")
	l.must("promise", "long ago", "--as", "a", "--to", "b", "--until", "1000-01-01T00:00:00Z", "--id", "past")
	l.must("promise", "iso", "--as", "a", "--to", "b", "--until", "P1DT2H", "--id", "iso")
	const now = "2026-09-01T17:00:00Z"

	show := l.must("show", "never", "--json", "--now", now)
	if !strings.Contains(show, `"until":"9999-12-31T00:00:00Z","horizons":["9999-12-31T00:00:00Z"],"state":"owed","overdue":false`) {
		t.Fatalf("show never: %s", show)
	}
	if text := l.must("show", "never", "--now", now); !strings.Contains(text, "9999-12-31T00:00:00Z  (current, in 2912198d7h)") {
		t.Fatalf("show never (text): %s", text)
	}
	show = l.must("show", "past", "--json", "--now", now)
	if !strings.Contains(show, `"until":"1000-01-01T00:00:00Z","horizons":["1000-01-01T00:00:00Z"],"state":"owed","overdue":true`) {
		t.Fatalf("show past: %s", show)
	}
	if text := l.must("show", "past", "--now", now); !strings.Contains(text, "owed, overdue 374982d17h") {
		t.Fatalf("show past (text): %s", text)
	}
	ids, _ := promisesOf(t, l.must("ls", "--overdue", "--json", "--now", now))
	if strings.Join(ids, ",") != "past" {
		t.Fatalf("overdue at %s: %v", now, ids)
	}
	ids, _ = promisesOf(t, l.must("ls", "--overdue", "--json", "--now", "9999-12-31T00:00:01Z"))
	if strings.Join(ids, ",") != "never,past,iso" {
		t.Fatalf("overdue at the end of 9999: %v", ids)
	}
	export := l.must("export")
	for _, want := range []string{`"until":"9999-12-31T00:00:00Z"`, `"until":"1000-01-01T00:00:00Z"`} {
		if !strings.Contains(export, want) {
			t.Fatalf("export lacks %s: %s", want, export)
		}
	}

	// Refusals name the field and the rule, exit 2 and append nothing.
	before := l.logBytes()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "-2h"}, `until: a duration counts forward: "-2h" is negative`},
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "0s"}, "until: a duration from now counts forward: must be at least 1s"},
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "0001-01-01T00:00:00Z"}, "until: must be after 0001-01-01T00:00:00Z (which means none) and no later than 9999-12-31T23:59:59.999999Z"},
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "9999-12-31T00:00:00.0000001Z"}, "until: before 1680 or after 2253 an instant is kept to the microsecond"},
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "120000d"}, "until: longer than 106751d (about 292 years)"},
		{[]string{"promise", "t", "--as", "a", "--to", "b", "--until", "P1Y"}, `until: "P1Y" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration from now (90m, 2h, 3d, 1w, 1d12h, or ISO 8601 such as PT6H, P1D, P1W, P1DT2H)`},
		{[]string{"amend", "never", "--as", "a", "--until", "-1d"}, `until: a duration counts forward: "-1d" is negative`},
		{[]string{"expect", "raise", "--as", "a", "--kind", "k", "--subject", "t:1", "--fact-key", "f", "--basis", "declared", "--due", "-2h"}, `due: a duration counts forward`},
		{[]string{"expect", "raise", "--as", "a", "--kind", "k", "--subject", "t:1", "--fact-key", "f", "--basis", "declared", "--due", "9999-12-31T23:00:00Z", "--grace", "2h"}, "grace: dueAt + grace must be after"},
		{[]string{"ls", "--now", "10000-01-01T00:00:00Z"}, `now: "10000-01-01T00:00:00Z" is not an RFC 3339 time`},
	} {
		r := l.run(c.args...)
		if r.code != 2 || !strings.Contains(r.err, c.want) {
			t.Errorf("want exit 2 with %q: %v", c.want, r)
		}
	}
	if !bytes.Equal(before, l.logBytes()) {
		t.Fatal("a refusal appended to the log")
	}

	// ISO 8601 durations of the expectations draft, and a year-9999 due.
	l.must("expect", "raise", "--as", "a", "--id", "e1", "--kind", "k", "--subject", "t:1", "--fact-key", "f", "--basis", "declared", "--due", "P1W", "--grace", "PT6H")
	l.must("expect", "raise", "--as", "a", "--id", "e2", "--kind", "k", "--subject", "t:1", "--fact-key", "g", "--basis", "declared", "--due", "9999-12-01T00:00:00Z", "--grace", "P1W")
	if doc := l.must("expect", "show", "e2", "--json"); !strings.Contains(doc, `"currentDue":"9999-12-01T00:00:00Z"`) || !strings.Contains(doc, `"grace":"PT168H"`) {
		t.Fatalf("expect show e2: %s", doc)
	}
}

// A checkpoint of far instants reads back identically: an import of 2,500
// promises with deadlines and times across years 0001–9999 leaves a
// checkpoint, and every read gives the same bytes with it, without it, and
// with it rebuilt.
func TestE2EFarInstantsCheckpoint(t *testing.T) {
	l := newLedger(t)
	years := []int{1, 999, 1677, 1680, 2026, 2253, 2262, 2263, 5000, 9999}
	var lines []string
	for i := 0; i < 2500; i++ {
		y := years[i%len(years)]
		until := fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", y, 1+i%12, 1+i%28, i%24, i%60, (i*7)%60, 1+i*37%999999) // never the zero instant, which is refused
		ts := fmt.Sprintf("%04d-06-01T00:00:%02dZ", years[(i+3)%len(years)], i%60)
		lines = append(lines, fmt.Sprintf(`{"ts":"%s","type":"promise","id":"f-%d","promise":"t","by":"d","to":"c","until":"%s"}`, ts, i, until))
		if i%3 == 0 {
			lines = append(lines, fmt.Sprintf(`{"ts":"%s","type":"amend","promise":"f-%d","by":"d","until":"9999-12-31T23:59:59.999999Z"}`, ts, i))
		}
	}
	l.must("import", writeFile(t, "far.jsonl", lines))
	if _, err := os.Stat(l.cpPath()); err != nil {
		t.Fatalf("no checkpoint after the import: %v", err)
	}
	verbs := [][]string{
		{"ls", "--all", "--json", "--now", "2026-09-01T00:00:00Z"},
		{"ls", "--overdue", "--json", "--now", "2263-01-01T00:00:00Z"},
		{"show", "f-7", "--json", "--now", "0500-01-01T00:00:00Z"},
		{"export"},
	}
	outputs := func() []string {
		var out []string
		for _, v := range verbs {
			out = append(out, l.must(v...))
		}
		return out
	}
	want := outputs()
	if !strings.Contains(want[0], `"id":"f-9","promise":"t","by":"d","to":"c","on":null,"task":null,"until":"9999-12-31T23:59:59.999999Z","horizons":["9999-10-10T09:09:03.000334Z","9999-12-31T23:59:59.999999Z"]`) {
		t.Fatalf("ls --all lacks f-9 as imported: %.2000s", want[0])
	}
	for i, line := range strings.Split(strings.TrimSuffix(want[3], "\n"), "\n") {
		if !strings.HasPrefix(line, lines[i][:len(lines[i])-1]+`,"tally":`) {
			t.Fatalf("export line %d: %s, imported %s", i+1, line, lines[i])
		}
	}
	if err := os.Remove(l.cpPath()); err != nil {
		t.Fatal(err)
	}
	for stage, got := range map[string][]string{"without the checkpoint": outputs(), "with it rebuilt": outputs()} {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %v differs", stage, verbs[i])
			}
		}
	}
}
