package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestControlCharactersAreRefusedByTheCLI: an id or evidence reference with
// a bidirectional override, or promise text with ESC or NUL, is a usage
// error (exit 2) naming the field and the character, locally and over
// TALLY_URL, and the log is unchanged.
func TestControlCharactersAreRefusedByTheCLI(t *testing.T) {
	refusals := [][]string{
		{"promise", "clear\x1b[2J the screen", "--to", "b", "--until", "2h"},
		{"promise", "p", "--id", "abc\u202egpj", "--to", "b", "--until", "2h"},
		{"resolve", "p1", "--satisfied", "--evidence", "https://example.org/\u2066x"},
	}
	wants := []string{"promise: must not hold U+001B", "id: must not hold U+202E", "evidence: must not hold U+2066"}
	check := func(name string, run func(args ...string) result, logBytes func() []byte) {
		t.Helper()
		before := logBytes()
		for i, args := range refusals {
			r := run(args...)
			if r.code != 2 || !strings.Contains(r.err, wants[i]) {
				t.Errorf("%s: %q: want exit 2 and %q: %v", name, args, wants[i], r)
			}
		}
		if !bytes.Equal(before, logBytes()) {
			t.Fatalf("%s: a refusal changed the log", name)
		}
	}

	l := newLedger(t)
	l.must("promise", "p", "--id", "p1", "--to", "b", "--until", "2h", "--as", "a")
	check("local", func(args ...string) result { return l.run(append(args, "--as", "a")...) }, l.logBytes)

	srv := startServer(t, "a")
	env := []string{"TALLY_URL=" + srv.url, "TALLY_TOKEN=" + srv.tokens["a"]}
	if r := run(t, runOpts{env: env}, "promise", "p", "--id", "p1", "--to", "b", "--until", "2h"); r.code != 0 {
		t.Fatalf("first write: %v", r)
	}
	check("remote", func(args ...string) result { return run(t, runOpts{env: env}, args...) }, func() []byte {
		b, _ := os.ReadFile(filepath.Join(srv.dir, "sessions", "default", "default", "log.jsonl"))
		return b
	})
}
