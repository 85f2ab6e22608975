package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestE2ERefusals: every refusal exits with its code, names the field (in
// text and in --json mode), prints nothing on stdout, and leaves the log's
// bytes as they were.
func TestE2ERefusals(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "open one", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "p1")
	l.must("promise", "done one", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "p2")
	l.must("resolve", "p2", "--satisfied", "--evidence", "https://example.org/done", "--as", "a")
	l.must("promise", "cancelled one", "--as", "a", "--to", "b", "--until", "2030-01-01T00:00:00Z", "--id", "p3")
	l.must("resolve", "p3", "--cancelled", "--reason", "dropped", "--as", "a")

	decl := func(extra ...string) []string {
		return append([]string{"promise", "text", "--as", "a", "--to", "b", "--until", "2h"}, extra...)
	}
	bigMeta := `{"pad":"` + strings.Repeat("x", 8<<10) + `"}`
	cases := []struct {
		name  string
		code  int
		field string
		args  []string
		env   []string
	}{
		{"bad RFC 3339", 2, "until", []string{"promise", "t", "--as", "a", "--to", "b", "--until", "2026-13-01T00:00:00Z"}, nil},
		{"bad RFC 3339 no zone", 2, "until", []string{"promise", "t", "--as", "a", "--to", "b", "--until", "2026-09-01T17:00:00"}, nil},
		{"bad duration", 2, "until", []string{"promise", "t", "--as", "a", "--to", "b", "--until", "5x"}, nil},
		{"missing until", 2, "until", []string{"promise", "t", "--as", "a", "--to", "b"}, nil},
		{"amend bad until", 2, "until", []string{"amend", "p1", "--until", "tomorrow", "--as", "a"}, nil},
		{"empty text", 2, "promise", []string{"promise", "", "--as", "a", "--to", "b", "--until", "2h"}, nil},
		{"blank text", 2, "promise", []string{"promise", "  \t ", "--as", "a", "--to", "b", "--until", "2h"}, nil},
		{"missing to", 2, "to", []string{"promise", "t", "--as", "a", "--until", "2h"}, nil},
		{"duplicate id", 1, "id", decl("--id", "p1"), nil},
		{"duplicate id of a resolved promise", 1, "id", decl("--id", "p2"), nil},
		{"id with a space", 2, "id", decl("--id", "a b"), nil},
		{"id with a tab", 2, "id", decl("--id", "a\tb"), nil},
		{"id with a newline", 2, "id", decl("--id", "a\nb"), nil},
		{"id over 128 characters", 2, "id", decl("--id", strings.Repeat("i", 129)), nil},
		{"id of 129 runes", 2, "id", decl("--id", strings.Repeat("é", 129)), nil},
		{"antecedent with whitespace", 2, "on", decl("--on", "x y"), nil},
		{"blank evidence", 2, "evidence", []string{"resolve", "p1", "--satisfied", "--evidence", "  ", "--as", "a"}, nil},
		{"one blank evidence among several", 2, "evidence", []string{"resolve", "p1", "--satisfied", "--evidence", "https://ok", "--evidence", "", "--as", "a"}, nil},
		{"missing evidence", 2, "evidence", []string{"resolve", "p1", "--satisfied", "--as", "a"}, nil},
		{"evidence on a cancel", 2, "evidence", []string{"resolve", "p1", "--cancelled", "--reason", "r", "--evidence", "x", "--as", "a"}, nil},
		{"cancel without reason", 2, "reason", []string{"resolve", "p1", "--cancelled", "--as", "a"}, nil},
		{"cancel with blank reason", 2, "reason", []string{"resolve", "p1", "--cancelled", "--reason", " ", "--as", "a"}, nil},
		{"two resolutions", 2, "as", []string{"resolve", "p1", "--cancelled", "--released", "--reason", "r", "--as", "a"}, nil},
		{"no resolution", 2, "as", []string{"resolve", "p1", "--as", "a"}, nil},
		{"amend unknown id", 1, "promise", []string{"amend", "nope", "--until", "2h", "--as", "a"}, nil},
		{"resolve unknown id", 1, "promise", []string{"resolve", "nope", "--satisfied", "--evidence", "x", "--as", "a"}, nil},
		{"release unknown id", 1, "promise", []string{"resolve", "nope", "--released", "--as", "b"}, nil},
		{"assess unknown id", 1, "promise", []string{"assess", "nope", "--violated", "--as", "c"}, nil},
		{"show unknown id", 1, "promise", []string{"show", "nope"}, nil},
		{"meta an array", 2, "meta", decl("--meta", `[1,2]`), nil},
		{"meta a string", 2, "meta", decl("--meta", `"s"`), nil},
		{"meta not JSON", 2, "meta", decl("--meta", `{nope}`), nil},
		{"meta empty object", 2, "meta", decl("--meta", `{}`), nil},
		{"meta over 8 KiB", 2, "meta", decl("--meta", bigMeta), nil},
		{"meta not an object on amend", 2, "meta", []string{"amend", "p1", "--until", "2h", "--meta", "7", "--as", "a"}, nil},
		{"meta not an object on resolve", 2, "meta", []string{"resolve", "p1", "--released", "--meta", "null", "--as", "b"}, nil},
		{"meta not an object on assess", 2, "meta", []string{"assess", "p1", "--violated", "--meta", "[]", "--as", "c"}, nil},
		{"declare for someone else", 1, "by", []string{"promise", "t", "--by", "b", "--as", "a", "--to", "c", "--until", "2h"}, nil},
		{"amend by a non-debtor", 1, "by", []string{"amend", "p1", "--until", "2h", "--as", "b"}, nil},
		{"amend by a non-debtor from TALLY_ACTOR", 1, "by", []string{"amend", "p1", "--until", "2h"}, []string{"TALLY_ACTOR=mallory"}},
		{"satisfy by a non-debtor", 1, "by", []string{"resolve", "p1", "--satisfied", "--evidence", "x", "--as", "b"}, nil},
		{"cancel by the creditor", 1, "by", []string{"resolve", "p1", "--cancelled", "--reason", "r", "--as", "b"}, nil},
		{"release by a non-creditor", 1, "by", []string{"resolve", "p1", "--released", "--as", "a"}, nil},
		{"assess as someone else", 1, "observer", []string{"assess", "p1", "--violated", "--observer", "b", "--as", "c"}, nil},
		{"assess without --violated", 2, "state", []string{"assess", "p1", "--as", "c"}, nil},
		{"amend a satisfied promise", 1, "promise", []string{"amend", "p2", "--until", "2h", "--as", "a"}, nil},
		{"amend a cancelled promise", 1, "promise", []string{"amend", "p3", "--until", "2h", "--as", "a"}, nil},
		{"resolve a satisfied promise again", 1, "promise", []string{"resolve", "p2", "--satisfied", "--evidence", "again", "--as", "a"}, nil},
		{"release a cancelled promise", 1, "promise", []string{"resolve", "p3", "--released", "--as", "b"}, nil},
		{"missing actor on promise", 2, "actor", []string{"promise", "t", "--to", "b", "--until", "2h"}, nil},
		{"missing actor on amend", 2, "actor", []string{"amend", "p1", "--until", "2h"}, nil},
		{"missing actor on resolve", 2, "actor", []string{"resolve", "p1", "--released"}, nil},
		{"missing actor on assess", 2, "actor", []string{"assess", "p1", "--violated"}, nil},
		{"missing actor on owed", 2, "actor", []string{"owed"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := l.logBytes()
			for _, jsonMode := range []bool{false, true} {
				args := tc.args
				if jsonMode {
					args = append(slices.Clone(args), "--json")
				}
				r := l.runWith(runOpts{env: tc.env}, args...)
				if r.code != tc.code {
					t.Errorf("want exit %d: %v", tc.code, r)
				}
				if r.out != "" {
					t.Errorf("a refusal printed on stdout: %v", r)
				}
				msg := r.err
				if jsonMode {
					doc := decode(t, r.err)
					if fmt.Sprint(doc["schema_version"]) != "1" || doc["code"] == nil || doc["code"] == "" {
						t.Errorf("--json error shape: %s", r.err)
					}
					if tc.code == 2 && doc["code"] != "invalid" && doc["code"] != "usage" {
						t.Errorf("usage error with code %v", doc["code"])
					}
					msg, _ = doc["error"].(string)
				}
				if !namesField(msg, tc.field) {
					t.Errorf("error does not name the field %q: %q", tc.field, msg)
				}
				if after := l.logBytes(); !slices.Equal(before, after) {
					t.Fatalf("the log changed after a refusal (%d → %d bytes)", len(before), len(after))
				}
			}
		})
	}
	if out := l.must("verify"); !strings.Contains(out, "ok: 5 line(s)") {
		t.Fatalf("verify after refusals: %s", out)
	}
}

// namesField reports whether msg reads "field: rule" somewhere, at the start
// or after another "name: " prefix.
func namesField(msg, field string) bool {
	return regexp.MustCompile(`(^|: )` + regexp.QuoteMeta(field) + `: `).MatchString(msg)
}

// TestE2EUnknownStdinFieldOfAnyType: pinki refuses unknown fields on the
// stdin record; the refusal must say the field is unknown whatever its JSON
// type, not complain about the value's type.
func TestE2EUnknownStdinFieldOfAnyType(t *testing.T) {
	l := newLedger(t)
	for _, v := range []string{`"soon"`, `1`, `true`, `{"a":1}`, `null`} {
		r := l.runWith(runOpts{stdin: `{"promise":"x","by":"a","to":"b","until":"2h","priority":` + v + `}`}, "promise")
		if r.code != 2 || !namesField(strings.TrimPrefix(strings.TrimSpace(r.err), "tally: "), "priority") || !strings.Contains(r.err, "not a field") {
			t.Errorf("unknown field with value %s: %v", v, r)
		}
	}
	if len(l.logBytes()) != 0 {
		t.Fatal("a refused stdin record was appended")
	}
}
