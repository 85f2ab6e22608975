package server

import (
	"bytes"
	"strings"
	"testing"
)

// TestControlCharactersAreRefused: ids and references refuse controls and
// bidirectional overrides, free text refuses NUL and ESC, in every family
// and over A2A, and nothing is appended.
func TestControlCharactersAreRefused(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", `{"id":"p1","promise":"p","to":"author","until":"2026-09-02T12:00:00Z"}`)
	before := f.logBytes()
	claim := func(id, work string) string {
		return `{"claim":"` + id + `","respondent":"author","work":"` + work + `","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"reviewer","mode":"required","phases":["programmatic"],"attempts":1}]}]}`
	}
	expectation := func(id, subject string) string {
		return `{"expectationId":"` + id + `","kind":"k","subject":{"type":"t","id":"` + subject + `"},"satisfiedBy":{"factKey":"f"},"dueAt":"2026-09-03T00:00:00Z","basis":"declared"}`
	}
	cases := []struct{ path, body, want string }{
		{"/promises", `{"id":"abc\u202egpj","promise":"p","to":"author","until":"2h"}`, "id: must not hold U+202E"},
		{"/promises", `{"id":"a\u2066b","promise":"p","to":"author","until":"2h"}`, "id: must not hold U+2066"},
		{"/promises", `{"id":"a\u009bb","promise":"p","to":"author","until":"2h"}`, "id: must not hold U+009B"},
		{"/promises", `{"promise":"done\u001b]0;owned\u0007","to":"author","until":"2h"}`, "promise: must not hold U+001B"},
		{"/promises", `{"promise":"a\u0000b","to":"author","until":"2h"}`, "promise: must not hold U+0000"},
		{"/promises/p1/resolve", `{"as":"satisfied","evidence":["https://example.org/\u202e"]}`, "evidence: must not hold U+202E"},
		{"/promises/p1/resolve", `{"as":"released","reason":"x\u001b[2J"}`, "reason: must not hold U+001B"},
		{"/promises/p1/assess", `{"note":"\u0000"}`, "note: must not hold U+0000"},
		{"/claims", claim("C\u202e1", "w"), "claim: must not hold U+202E"},
		{"/claims", claim("C1", `w\u001b[31m`), "work: must not hold U+001B"},
		{"/expectations", expectation("e\u2067", "1"), "expectationId: must not hold U+2067"},
		{"/expectations", expectation("e1", "s\u202d"), "subject.id: must not hold U+202D"},
	}
	for _, c := range cases {
		code, body, _ := f.do("POST", base+c.path, "reviewer", c.body)
		if code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("POST %s %s: %d %s\nwant %s", c.path, c.body, code, body, c.want)
		}
	}
	_, r, _ := f.rpc("reviewer", "urn:tally:ext:promise", "SendMessage", map[string]any{"message": map[string]any{
		"messageId": "m1", "role": "ROLE_USER", "parts": []any{map[string]any{"text": "x"}},
		"metadata": map[string]any{"urn:tally:ext:promise": map[string]any{"id": "a\u202eb", "promise": "p", "to": "author", "until": "2h"}},
	}})
	if r.Error == nil || !strings.Contains(r.raw, `must not hold U+202E`) {
		t.Errorf("A2A SendMessage of a bidi id: %s", r.raw)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused record was appended")
	}
}

// TestOldRecordsWithControlCharactersStillFold: the rules apply to commands
// being decided; records already written (here: imported, which keeps a
// log's records as they are) still fold and read back.
func TestOldRecordsWithControlCharactersStillFold(t *testing.T) {
	f := newFixture(t)
	f.token("boss", "admin")
	old := `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"abc\u202egpj","promise":"ls\u001b[2J","by":"a","to":"b","until":"2026-08-31T12:00:00Z"}` + "\n"
	f.want(200, "POST", base+"/import", "boss", old, "Content-Type", "application/x-ndjson")
	body := f.want(200, "GET", base+"/promises?state=all", "author", "")
	if !strings.Contains(body, `"id":"abc\u202egpj"`) && !strings.Contains(body, "abc\u202egpj") {
		t.Fatalf("the old record does not read back: %s", body)
	}
}
