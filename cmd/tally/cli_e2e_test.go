package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestE2EUnknownVerbIsUsageError: a typo of a verb under a command group
// exits 2 naming the closest verb, prints nothing on stdout and appends nothing.
func TestE2EUnknownVerbIsUsageError(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "one", "--as", "a", "--to", "b", "--until", "2h")
	before := l.logBytes()
	for _, c := range []struct{ args, want []string }{
		{[]string{"check", "reprot"}, []string{`unknown command "reprot" for "tally check"`, `did you mean "report"?`}},
		{[]string{"claim", "craete", "C1"}, []string{`unknown command "craete" for "tally claim"`, `did you mean "create"?`}},
		{[]string{"expect", "rasie"}, []string{`unknown command "rasie" for "tally expect"`, `"raise"`}},
	} {
		r := l.run(c.args...)
		if r.code != 2 || r.out != "" {
			t.Fatalf("want exit 2 and no stdout: %v", r)
		}
		for _, w := range c.want {
			if !strings.Contains(r.err, w) {
				t.Fatalf("stderr lacks %q: %v", w, r)
			}
		}
		if r := l.run(append(c.args, "--json")...); r.code != 2 || decode(t, r.err)["code"] != "usage" {
			t.Fatalf("--json: %v", r)
		}
	}
	if !bytes.Equal(l.logBytes(), before) {
		t.Fatal("a refused verb changed the log")
	}
}
