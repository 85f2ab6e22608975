package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"tally/ledgerservice"
	"tally/store"
)

// adminFixture is a fixture with an admin-role token ("boss") of acme.
func adminFixture(t *testing.T) *fixture {
	f := newFixture(t)
	tok, _, err := fileTokens(f.srv).Create("acme", "boss", "admin", t0)
	if err != nil {
		t.Fatal(err)
	}
	f.tokens["boss"] = tok
	return f
}

// twoPromises declares two promises in acme/main.
func (f *fixture) twoPromises() {
	f.t.Helper()
	for _, b := range []string{
		`{"id":"p1","promise":"hand back a reviewed schema","to":"author","until":"2026-09-01T17:00:00Z"}`,
		`{"id":"p2","promise":"then the changelog","to":"author","on":"p1","until":"2026-09-02T17:00:00Z","meta":{"lane":"docs"}}`,
	} {
		if code, body, _ := f.do("POST", base+"/promises", "reviewer", b); code != 201 {
			f.t.Fatalf("declare: %d %s", code, body)
		}
	}
}

// pinkiOf is the log's lines without their envelopes, as export --format pinki prints them.
func pinkiOf(log []byte) string {
	var b strings.Builder
	for _, ln := range bytes.SplitAfter(log, []byte{'\n'}) {
		if len(ln) > 0 {
			b.Write(store.Body(bytes.TrimSuffix(ln, []byte{'\n'})))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func TestExportOverHTTP(t *testing.T) {
	f := newFixture(t)
	f.twoPromises()
	log := f.logBytes()

	code, body, hdr := f.do("GET", base+"/export?format=jsonl", "author", "")
	if code != 200 || body != string(log) || hdr.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export jsonl: %d %q\nwant the log %q", code, body, log)
	}
	if code, body, _ := f.do("GET", base+"/export", "author", ""); code != 200 || body != string(log) {
		t.Errorf("export without a format is jsonl: %d %q", code, body)
	}
	code, body, _ = f.do("GET", base+"/export?format=pinki", "observer", "")
	if code != 200 || body != pinkiOf(log) || strings.Contains(body, `"tally":`) {
		t.Errorf("export pinki: %d %q\nwant %q", code, body, pinkiOf(log))
	}
	const now = "2026-09-02T10:00:00Z"
	_, list, _ := f.do("GET", base+"/promises?state=all&now="+now, "author", "")
	if code, body, _ := f.do("GET", base+"/export?format=json&now="+now, "author", ""); code != 200 || body != list {
		t.Errorf("export json: %d %s\nwant the list of every promise %s", code, body, list)
	}

	cases := []struct {
		name, path, who string
		code            int
		field           string
	}{
		{"no token", base + "/export", "", 401, ""},
		{"foreign tenant", base + "/export", "foreign", 404, ""},
		{"unknown format", base + "/export?format=csv", "author", 400, "format"},
		{"bad now", base + "/export?format=json&now=soon", "author", 400, "now"},
	}
	for _, c := range cases {
		code, body, _ := f.do("GET", c.path, c.who, "")
		if code != c.code || !strings.Contains(body, c.field) {
			t.Errorf("%s: want %d naming %q: %d %s", c.name, c.code, c.field, code, body)
		}
	}
}

func TestExportOfADamagedLogIsRefused(t *testing.T) {
	f := newFixture(t)
	f.twoPromises()
	damageLine(t, f.logPath(), 2)
	code, body, _ := f.do("GET", base+"/export?format=pinki", "author", "")
	if code != 500 || !strings.Contains(body, `"code":"corrupt"`) || !strings.Contains(body, "sessions/acme/main/log.jsonl: line 2") || strings.Contains(body, f.root) {
		t.Errorf("export of a damaged log: %d %s", code, body)
	}
}

func (f *fixture) logPath() string {
	return filepath.Join(f.root, "sessions", "acme", "main", "log.jsonl")
}

// damageLine flips one byte of the text of line n of the log at path.
func damageLine(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte{'\n'})
	i := bytes.Index(lines[n-1], []byte(`"promise":"`)) + len(`"promise":"`)
	lines[n-1][i] ^= 0x01
	if err := os.WriteFile(path, bytes.Join(lines, nil), 0o644); err != nil {
		t.Fatal(err)
	}
}

// verifyReport decodes a verify answer.
type verifyReport struct {
	Whole   bool    `json:"whole"`
	Lines   uint64  `json:"lines"`
	Error   *string `json:"error"`
	Torn    *struct{ Offset, Bytes int64 }
	Unknown []struct {
		Type  string `json:"type"`
		Count int    `json:"count"`
	} `json:"unknown"`
}

func (f *fixture) verify(session string) (verifyReport, http.Header) {
	f.t.Helper()
	code, body, hdr := f.do("GET", "/v1/tenants/acme/sessions/"+session+"/verify", "author", "")
	var v verifyReport
	if err := json.Unmarshal([]byte(body), &v); code != 200 || err != nil {
		f.t.Fatalf("verify %s: %d %s", session, code, body)
	}
	return v, hdr
}

func TestVerifyOverHTTP(t *testing.T) {
	f := newFixture(t)
	f.twoPromises()
	code, body, hdr := f.do("GET", base+"/verify", "author", "")
	want := `{"schema_version":1,"whole":true,"lines":2,"error":null,"torn":null,"unknown":[]}` + "\n"
	if code != 200 || body != want || hdr.Get(LogHeader) != "sessions/acme/main/log.jsonl" {
		t.Fatalf("verify of a whole log: %d %q %q", code, body, hdr.Get(LogHeader))
	}
	for _, c := range []struct {
		who  string
		code int
	}{{"", 401}, {"foreign", 404}} {
		if code, body, _ := f.do("GET", base+"/verify", c.who, ""); code != c.code {
			t.Errorf("verify as %q: want %d: %d %s", c.who, c.code, code, body)
		}
	}

	// A torn tail is reported, with where it starts.
	good, _ := os.ReadFile(f.logPath())
	os.WriteFile(f.logPath(), append(bytes.Clone(good), `{"ts":"2026`...), 0o644)
	if v, _ := f.verify("main"); v.Whole || v.Error != nil || v.Torn == nil || v.Torn.Offset != int64(len(good)) || v.Torn.Bytes != 11 || v.Lines != 2 {
		t.Errorf("verify of a torn tail: %+v", v)
	}
	os.WriteFile(f.logPath(), good, 0o644)

	// Damage in an open session names its line and the log under the
	// ledger directory, never the server's own path.
	damageLine(t, f.logPath(), 2)
	damaged, _ := os.ReadFile(f.logPath())
	v, _ := f.verify("main")
	if v.Whole || v.Error == nil || !strings.HasPrefix(*v.Error, "sessions/acme/main/log.jsonl: line 2: ") || strings.Contains(*v.Error, f.root) {
		t.Errorf("verify of a damaged open session: %+v", v)
	}
	// A session too damaged to open is verified on the bare file.
	cold := filepath.Join(f.root, "sessions", "acme", "cold")
	os.MkdirAll(cold, 0o755)
	if err := os.WriteFile(filepath.Join(cold, "log.jsonl"), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	v, hdr = f.verify("cold")
	if v.Whole || v.Error == nil || !strings.HasPrefix(*v.Error, "sessions/acme/cold/log.jsonl: line 2: ") || hdr.Get(LogHeader) != "sessions/acme/cold/log.jsonl" {
		t.Errorf("verify of a session that does not open: %+v", v)
	}
	if after, _ := os.ReadFile(f.logPath()); !bytes.Equal(after, damaged) {
		t.Errorf("verify changed the log")
	}
}

var importLines = []string{
	`{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"pnk_0c2b77","promise":"draft the schema","by":"…/author","to":"…/reviewer","until":"2026-08-31T12:00:00Z"}`,
	`{"ts":"2026-08-30T09:00:00Z","type":"resolve","promise":"pnk_0c2b77","as":"satisfied","by":"…/author","evidence":["https://example.org/drafts/v1"]}`,
	`{"ts":"2026-09-01T19:00:00Z","type":"nudge","promise":"pnk_0c2b77","rung":2}`,
	`{"ts":"2026-09-02T10:02:00Z","type":"promise","id":"pnk_88de10","promise":"say \"hi\" café ☕","by":"a","to":"b","until":"2026-09-03T00:00:00.5Z","provenance":"v0.2"}`,
}

func TestImportOverHTTP(t *testing.T) {
	f := adminFixture(t)
	f.twoPromises()
	body := strings.Join(importLines, "\n") + "\n"
	ndjson := []string{"Content-Type", "application/x-ndjson"}
	before := f.logBytes()

	bad := func(n int) string {
		ls := append([]string(nil), importLines...)
		ls[n-1] = `{"ts":"2026-08-28T20:10:00Z","type":"promise",`
		return strings.Join(ls, "\n")
	}
	cases := []struct {
		name, who, body string
		hdr             []string
		code            int
		want            string
	}{
		{"no token", "", body, ndjson, 401, "unauthenticated"},
		{"foreign tenant", "foreign", body, ndjson, 404, "not_found"},
		{"agent role", "reviewer", body, ndjson, 403, `"error":"role: only an admin-role token imports: an import appends records as the parties they name, and this token acts as reviewer with role agent","code":"forbidden"`},
		{"malformed line 3", "boss", bad(3), ndjson, 400, `"error":"line 3: not a JSON object","code":"invalid"`},
		{"bad until on line 1", "boss", strings.Replace(body, "2026-08-31T12:00:00Z", "next week", 1), ndjson, 400, `"error":"line 1: until: `},
		{"no records", "boss", "\n\n", ndjson, 400, "file: holds no records"},
		{"JSON body", "boss", body, []string{"Content-Type", "application/json"}, 415, "Content-Type"},
		{"request id too long", "boss", body, append([]string{"Idempotency-Key", strings.Repeat("k", 257)}, ndjson...), 400, "Idempotency-Key"},
	}
	for _, c := range cases {
		code, got, _ := f.do("POST", base+"/import", c.who, c.body, c.hdr...)
		if code != c.code || !strings.Contains(got, c.want) {
			t.Errorf("%s: want %d with %q: %d %.300s", c.name, c.code, c.want, code, got)
		}
		if !bytes.Equal(before, f.logBytes()) {
			t.Fatalf("%s: a refused import appended to the log", c.name)
		}
	}

	// Too large: refused from its declared length before a byte is read,
	// and, sent without one, as soon as the bound is passed.
	for _, declared := range []bool{true, false} {
		req := httptest.NewRequest("POST", base+"/import", io.LimitReader(repeatReader(importLines[0]+"\n"), ImportBodyMax+1))
		req.ContentLength = -1
		if declared {
			req.ContentLength = ImportBodyMax + 1
		}
		req.Header.Set("Authorization", "Bearer "+f.tokens["boss"])
		req.Header.Set("Content-Type", "application/x-ndjson")
		rec := httptest.NewRecorder()
		f.srv.Handler().ServeHTTP(rec, req)
		if rec.Code != 413 || !strings.Contains(rec.Body.String(), "at most") {
			t.Errorf("too large (length declared %v): %d %s", declared, rec.Code, rec.Body)
		}
		if !bytes.Equal(before, f.logBytes()) {
			t.Fatalf("too large: a refused import appended to the log")
		}
	}

	for _, ct := range []string{"application/x-ndjson", "text/plain; charset=utf-8"} {
		g := adminFixture(t)
		code, got, _ := g.do("POST", base+"/import", "boss", body, "Content-Type", ct)
		want := `{"schema_version":1,"appended":4,"unknown":1,"first_seq":1,"last_seq":4,"warnings":["line 3: record type \"nudge\" is not one tally folds; kept as is"]}` + "\n"
		if code != 200 || got != want {
			t.Fatalf("import as %s:\n got %d %s\nwant %s", ct, code, got, want)
		}
		// Every record keeps its bytes: the pinki export is the input,
		// less the record of a type tally does not fold.
		_, out, hdr := g.do("GET", base+"/export?format=pinki", "author", "")
		wantOut := strings.Join([]string{importLines[0], importLines[1], importLines[3]}, "\n") + "\n"
		if out != wantOut {
			t.Errorf("pinki export after an import:\n got %s\nwant %s", out, wantOut)
		}
		if warn := hdr.Get(WarningHeader); !strings.Contains(warn, `"nudge" ×1 (first at line 3`) {
			t.Errorf("export after an import of an unknown type: warning %q", warn)
		}
		if v, _ := g.verify("main"); !v.Whole || v.Lines != 4 || len(v.Unknown) != 1 || v.Unknown[0].Type != "nudge" {
			t.Errorf("verify after an import: %+v", v)
		}
	}

	// The route's own bound: an import larger than other writes may be.
	pad := `{"ts":"2026-09-01T19:00:00Z","type":"nudge","pad":"` + strings.Repeat("x", 100<<10) + `"}`
	large := strings.Repeat(pad+"\n", 24)
	if len(large) <= int(DefaultConfig().BodyMax) {
		t.Fatalf("the large import is not larger than BodyMax")
	}
	g := adminFixture(t)
	if code, got, _ := g.do("POST", base+"/import", "boss", large, ndjson...); code != 200 || !strings.Contains(got, `"appended":24,"unknown":24`) {
		t.Errorf("import over BodyMax within ImportBodyMax: %d %.300s", code, got)
	}

	// After the other writes, the import's lines follow them.
	code, got, _ := f.do("POST", base+"/import", "boss", body, ndjson...)
	if code != 200 || !strings.Contains(got, `"first_seq":3,"last_seq":6`) {
		t.Errorf("import after two declarations: %d %s", code, got)
	}
}

// An import with an Idempotency-Key is recorded with its records: a retry
// gets the answer byte for byte and appends nothing;
// the key with another body is a conflict; a large number of unknown types
// is summed up so the answer fits its log line.
func TestImportIsIdempotentByKey(t *testing.T) {
	f := adminFixture(t)
	body := strings.Join(importLines, "\n") + "\n"
	hdr := []string{"Content-Type", "application/x-ndjson", "Idempotency-Key", "imp-1"}
	code, first, h := f.do("POST", base+"/import", "boss", body, hdr...)
	want := `{"schema_version":1,"appended":4,"unknown":1,"first_seq":1,"last_seq":4,"warnings":["line 3: record type \"nudge\" is not one tally folds; kept as is"]}` + "\n"
	if code != 200 || first != want || h.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first import: %d %s", code, first)
	}
	after := f.logBytes()
	code, again, h := f.do("POST", base+"/import", "boss", body, hdr...)
	if code != 200 || again != first || h.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry: %d %s (replayed %q)", code, again, h.Get("Idempotent-Replayed"))
	}
	if !bytes.Equal(after, f.logBytes()) {
		t.Fatal("a retried import appended to the log")
	}
	code, got, _ := f.do("POST", base+"/import", "boss", strings.Join(importLines[:2], "\n"), hdr...)
	if code != 409 || !strings.Contains(got, "IdempotencyConflict") || !bytes.Equal(after, f.logBytes()) {
		t.Fatalf("same key, other body: %d %s", code, got)
	}

	var many strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&many, `{"ts":"2026-09-01T19:00:00Z","type":"nudge%d"}`+"\n", i)
	}
	code, got, _ = f.do("POST", base+"/import", "boss", many.String(), "Content-Type", "application/x-ndjson", "Idempotency-Key", "imp-2")
	if code != 200 || strings.Count(got, "kept as is") != ledgerservice.ImportWarningsMax || !strings.Contains(got, "and 400 more lines") {
		t.Fatalf("500 unknown types: %d %.400s", code, got)
	}
	if code, again, _ := f.do("POST", base+"/import", "boss", many.String(), "Content-Type", "application/x-ndjson", "Idempotency-Key", "imp-2"); code != 200 || again != got {
		t.Fatalf("retry of the large import: %d", code)
	}
}

// repeatReader yields s over and over (each read starts s afresh).
type repeatReader string

func (r repeatReader) Read(p []byte) (int, error) {
	n := copy(p, r)
	for n < len(p) {
		n += copy(p[n:], p[:n])
	}
	return n, nil
}

// manyLines is an import of n promise records, more than one buffer of export.
func manyLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"ts":"2026-08-28T20:10:00Z","type":"promise","id":"p%d","promise":"promise number %d, with some words to make the line longer than most","by":"a","to":"b","until":"2026-08-31T12:00:00Z"}`+"\n", i, i)
	}
	return b.String()
}

// An export that meets damage after its first bytes went out ends with the
// error in its trailer.
func TestExportDamageAfterTheFirstBytesEndsInATrailer(t *testing.T) {
	f := adminFixture(t)
	if code, body, _ := f.do("POST", base+"/import", "boss", manyLines(500), "Content-Type", "application/x-ndjson"); code != 200 {
		t.Fatalf("import: %d %s", code, body)
	}
	damageLine(t, f.logPath(), 490)
	req, _ := http.NewRequest("GET", f.ts.URL+base+"/export?format=jsonl", nil)
	req.Header.Set("Authorization", "Bearer "+f.tokens["author"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	trailer := resp.Trailer.Get(ExportErrorTrailer)
	if resp.StatusCode != 200 || len(got) < 1<<16 || !strings.Contains(trailer, `"error":"sessions/acme/main/log.jsonl: line 490: `) || !strings.Contains(trailer, `"code":"corrupt"`) {
		t.Errorf("export of a log damaged at line 490: %d, %d bytes, trailer %q", resp.StatusCode, len(got), trailer)
	}
	if bytes.Contains(got, []byte(`"id":"p490"`)) {
		t.Errorf("the damaged line was exported")
	}
}
