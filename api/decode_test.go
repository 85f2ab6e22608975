package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"tally/refuse"
)

// TestDecodeRefusals pins the one decoder's refusals, word for word, as
// stdin, a REST body and an A2A record give them.
func TestDecodeRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  any
		body string
		want string
	}{
		{"not an object", &PromiseDeclare{}, `["x"]`, "body: must be one JSON object"},
		{"empty", &PromiseDeclare{}, "  ", "body: must be one JSON object"},
		{"syntax", &PromiseDeclare{}, "{\"promise\":\"x\",\n \"to\" \"b\"}", "body: invalid JSON at byte offset 22 (line 2, column 7): expected ':'"},
		{"not JSON whitespace", &ClaimEnd{}, "{}\v", "body: invalid JSON at byte offset 2 (line 1, column 3): data after the value"},
		{"ends early", &ClaimEnd{}, `{"claim":"C1"`, "body: invalid JSON at byte offset 13 (line 1, column 14): unterminated object"},
		{"data after", &ClaimEnd{}, `{"claim":"C1"} {}`, "body: invalid JSON at byte offset 15 (line 1, column 16): data after the value"},
		{"invalid UTF-8", &ClaimEnd{}, "{\"reason\":\"\xff\"}", "body: invalid JSON at byte offset 11 (line 1, column 12): invalid UTF-8 in string"},
		{"unknown", &PromiseDeclare{}, `{"promise":"x","priority":1}`, "priority: is not a field of this command (by, id, meta, on, promise, task, to, until)"},
		{"unknown of any type", &PromiseDeclare{}, `{"priority":null}`, "priority: is not a field of this command (by, id, meta, on, promise, task, to, until)"},
		{"names are exact", &ClaimEnd{}, `{"Claim":"C1"}`, "Claim: is not a field of this command (claim, reason)"},
		{"twice", &PromiseDeclare{}, `{"to":"a","to":"b"}`, "to: appears twice"},
		{"twice escaped", &PromiseDeclare{}, `{"to":"a","t\u006f":"b"}`, "to: appears twice"},
		{"twice nested", &ExpectRaise{}, `{"subject":{"type":"a","type":"b"}}`, "subject.type: appears twice"},
		{"twice in meta", &PromiseAmend{}, `{"meta":{"k":1,"k":2}}`, "meta.k: appears twice"},
		{"empty name", &PromiseDeclare{}, `{"":"x"}`, "body: has a member with an empty name"},
		{"empty nested name", &ExpectRaise{}, `{"origin":{"":"x"}}`, "origin: has a member with an empty name"},
		{"empty name in an array", &ClaimCreate{}, `{"claim":"00","slots":[{"":[]}]}`, "body: has a member with an empty name"},
		{"meta not an object", &PromiseDeclare{}, `{"meta":[1]}`, "meta: must be a JSON object"},
		{"meta null", &PromiseDeclare{}, `{"meta":null}`, "meta: must be a JSON object"},
		{"wrong type", &PromiseDeclare{}, `{"until":5}`, "until: must be a string, not number"},
		{"evidence not an array", &PromiseResolve{}, `{"evidence":"e"}`, "evidence: must be an array, not string"},
		{"evidence of numbers", &PromiseResolve{}, `{"evidence":[1]}`, "evidence: must be a string, not number"},
		{"nested unknown", &ClaimCreate{}, `{"slots":[{"name":"s","color":"red"}]}`, "color: is not a field of this command (awaits, claim, claimant, deadline, depends_on, derived_from, max_responses, no_checks, pool, predecessor, priority, respondent, reviews, scope, slots, work)"},
	} {
		err := Decode("body", []byte(tc.body), tc.doc)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %s: got %v, want %q", tc.name, tc.body, err, tc.want)
			continue
		}
		if r, ok := refuse.As(err); !ok || r.Code != refuse.Invalid || r.Field == "" {
			t.Errorf("%s: %v is not an invalid refusal naming a field", tc.name, err)
		}
	}
}

// TestDecodeKeepsMeta checks a meta object is kept byte for byte, as the
// record carries it.
func TestDecodeKeepsMeta(t *testing.T) {
	var d PromiseDeclare
	if err := Decode("stdin", []byte(`{"promise":"x","meta":{ "b":1, "a":[2] }}`), &d); err != nil {
		t.Fatal(err)
	}
	if d.Meta != `{ "b":1, "a":[2] }` || d.Promise != "x" {
		t.Fatalf("meta %q", d.Meta)
	}
}

// FuzzDecode feeds arbitrary bytes to the decoder for documents of every
// family: no panic; every refusal is a refusal naming a field; what it
// accepts is one JSON object without a member given twice, that
// encoding/json reads the same way.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"promise":"x","to":"b","until":"2h","meta":{"a":1}}`))
	f.Add([]byte(`{"as":"satisfied","evidence":["e"]}`))
	f.Add([]byte(`{"promise":1}`))
	f.Add([]byte(`{"claim":"C1","slots":[{"name":"s","checks":[]}],"no_checks":true}`))
	f.Add([]byte(`{"subject":{"type":"t","id":"1"},"dueAt":"2026-12-02T00:00:00Z","anchor":{"expectationId":"e","offset":"PT1H"}}`))
	f.Add([]byte(`{"to":"a","to":"b"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, doc := range []func() any{
			func() any { return &PromiseDeclare{} }, func() any { return &PromiseResolve{} },
			func() any { return &ClaimCreate{} }, func() any { return &ClaimTestament{} },
			func() any { return &ExpectRaise{} }, func() any { return &ExpectFact{} },
		} {
			d := doc()
			err := Decode("body", b, d)
			if err != nil {
				if r, ok := refuse.As(err); !ok || r.Field == "" {
					t.Fatalf("%T: refusal without a field: %v", d, err)
				}
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(b, &m) != nil {
				t.Fatalf("%T: accepted what is not a JSON object: %q", d, b)
			}
			if n := strings.Count(string(b), ":"); n < len(m) {
				t.Fatalf("%T: %d members from %d colons: %q", d, len(m), n, b)
			}
			again := doc()
			if err := json.Unmarshal(b, again); err != nil {
				t.Fatalf("%T: accepted what encoding/json refuses: %v", d, err)
			}
			// The walk's own decoding reads what encoding/json reads (but
			// for a lone surrogate escape, which tally's scanner keeps
			// apart from U+FFFD).
			if !reflect.DeepEqual(d, again) && !strings.Contains(strings.ToLower(string(b)), `\ud`) {
				t.Fatalf("%T: decoded %+v, encoding/json %+v from %q", d, d, again, b)
			}
		}
	})
}
