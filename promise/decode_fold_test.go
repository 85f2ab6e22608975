package promise

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// The fold's decode (reading ts, type, as and state in place and taking
// participants from the interned names) gives exactly what Decode gives,
// errors included, whatever the shape of the value.
func TestFoldDecodeMatchesDecode(t *testing.T) {
	lines := []string{
		`{"ts":"2026-01-02T03:04:05Z","type":"promise","id":"p1","promise":"x","by":"a","to":"b","until":"2026-02-01T00:00:00Z"}`,
		`{"ts":"2026-01-02T03:04:05.5Z","type":"amend","promise":"p1","by":"a","until":"2026-03-01T00:00:00Z"}`,
		`{"ts":"2026-01-02T03:04:05+01:00","type":"resolve","promise":"p1","as":"satisfied","by":"\u0061"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"assess","promise":"p1","state":"violated","observer":"o"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"assess","promise":"p1","state":"late","observer":"a"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"resolve","promise":"p1","as":"done","by":"a"}`,
		`{"ts":"2026-02-30T03:04:05Z","type":"promise","id":"p2","until":"2026-02-01T00:00:00Z"}`,
		`{"ts":"0000-01-01T00:00:00Z","type":"promise","id":"p2","until":"2026-02-01T00:00:00Z"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"prom\u0069se","id":"p3","until":"2026-02-01T00:00:00Z"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"other","id":"p3"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"promise","id":"p4","by":7,"until":"2026-02-01T00:00:00Z"}`,
		`{"ts":"2026-01-02T03:04:05Z","type":"promise","id":"p4","by":"","to":"b","until":"2026-02-01T00:00:00Z"}`,
		`{"type":"promise","id":"p5","until":"2026-02-01T00:00:00Z"}`,
	}
	names := map[string]string{}
	for _, line := range lines {
		want, wantErr := Decode([]byte(line))
		got, gotErr := decode([]byte(line), names)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Errorf("%s: error %v, Decode's %v", line, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !got.named {
			t.Errorf("%s: not marked named", line)
		}
		got.named = false
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", line, got, want)
		}
		if gotErr == nil {
			checkAgainstJSON(t, line, got)
		}
	}
	// A participant read again is the interned string, not a new copy.
	a1, _ := decode([]byte(lines[0]), names)
	a2, _ := decode([]byte(lines[1]), names)
	if unsafe.StringData(a1.By) != unsafe.StringData(a2.By) || unsafe.StringData(a1.By) != unsafe.StringData(names["a"]) {
		t.Error(`"a" read twice is two strings`)
	}
}

// Folding a declaration allocates neither its type, its ts nor a known
// participant.
func TestFoldDecodeAllocations(t *testing.T) {
	line := []byte(`{"ts":"2026-01-02T03:04:05Z","type":"resolve","promise":"p1","as":"satisfied","by":"a"}`)
	names := map[string]string{"a": "a"}
	n := testing.AllocsPerRun(100, func() {
		if _, err := decode(line, names); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 { // the promise id
		t.Errorf("%v allocations a decode, want 1", n)
	}
}

// checkAgainstJSON compares an event with encoding/json's reading of its
// line: the two decoders share no code.
func checkAgainstJSON(t *testing.T, line string, e Event) {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatal(err)
	}
	str := func(k string) string { s, _ := m[k].(string); return s }
	ts, err := time.Parse(time.RFC3339Nano, str("ts"))
	if err != nil || !e.TS.Equal(ts) {
		t.Errorf("%s: ts %v, want %v", line, e.TS, ts)
	}
	id := str("promise")
	if e.Type == TypePromise {
		id = str("id")
	}
	for _, f := range []struct{ name, got, want string }{
		{"type", e.Type, str("type")}, {"id", e.ID, id}, {"by", e.By, str("by")}, {"to", e.To, str("to")},
		{"until", e.Until, str("until")}, {"as", e.As, str("as")}, {"state", e.State, str("state")},
		{"observer", e.Observer, str("observer")},
	} {
		if f.got != f.want {
			t.Errorf("%s: %s %q, want %q", line, f.name, f.got, f.want)
		}
	}
}
