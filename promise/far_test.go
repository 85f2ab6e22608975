package promise

import (
	"errors"
	"strings"
	"testing"
	"time"

	"tally/family"
	"tally/refuse"
)

// Far instants on the wire: kept exactly by the fold and the snapshot;
// what tally cannot keep is a decode error naming the member.
func TestFarInstantsOnTheWire(t *testing.T) {
	s := fold(t,
		`{"ts":"9000-01-01T00:00:00.000001Z","type":"promise","id":"a","promise":"x","by":"d","to":"c","until":"9999-12-31T00:00:00Z"}`,
		`{"ts":"1500-01-01T00:00:00Z","type":"promise","id":"b","promise":"x","by":"d","to":"c","until":"1000-01-01T00:00:00Z"}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"amend","promise":"b","by":"d","until":"0001-01-01T00:00:00.000001Z"}`,
		`{"ts":"9999-12-31T23:59:59.999999Z","type":"resolve","promise":"b","by":"d","as":"cancelled","reason":"r"}`,
	)
	now := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	wantA := `{"id":"a","promise":"x","by":"d","to":"c","on":null,"task":null,"until":"9999-12-31T00:00:00Z","horizons":["9999-12-31T00:00:00Z"],"state":"owed","overdue":false,"evidence":[],"reason":null,"resolved_by":null,"resolved_at":null,"assessments":[],"declared":"9000-01-01T00:00:00.000001Z","seq":1,"meta":null}`
	wantB := `{"id":"b","promise":"x","by":"d","to":"c","on":null,"task":null,"until":"0001-01-01T00:00:00.000001Z","horizons":["1000-01-01T00:00:00Z","0001-01-01T00:00:00.000001Z"],"state":"cancelled","overdue":false,"evidence":[],"reason":"r","resolved_by":"d","resolved_at":"9999-12-31T23:59:59.999999Z","assessments":[],"declared":"1500-01-01T00:00:00Z","seq":2,"meta":null}`
	if got := viewJSON(s, "a", now); got != wantA {
		t.Fatalf("a:\n got %s\nwant %s", got, wantA)
	}
	if got := viewJSON(s, "b", now); got != wantB {
		t.Fatalf("b:\n got %s\nwant %s", got, wantB)
	}
	back, rest, err := ReadSnapshot(s.AppendSnapshot(nil))
	if err != nil || len(rest) != 0 {
		t.Fatalf("snapshot: %v, %d bytes left", err, len(rest))
	}
	if viewJSON(back, "a", now) != wantA || viewJSON(back, "b", now) != wantB {
		t.Fatalf("snapshot reads back as\n%s\n%s", viewJSON(back, "a", now), viewJSON(back, "b", now))
	}

	for _, c := range []struct{ line, field string }{
		{`{"ts":"2026-09-01T17:00:00Z","type":"promise","id":"z","promise":"x","by":"d","to":"c","until":"0001-01-01T00:00:00Z"}`, "until"},
		{`{"ts":"2026-09-01T17:00:00Z","type":"promise","id":"z","promise":"x","by":"d","to":"c","until":"9999-12-31T00:00:00.0000001Z"}`, "until"},
		{`{"ts":"0000-01-01T00:00:00Z","type":"promise","id":"z","promise":"x","by":"d","to":"c","until":"2026-09-01T17:00:00Z"}`, "ts"},
	} {
		_, err := Decode([]byte(c.line))
		var de *family.DecodeError
		if err == nil || !errors.As(err, &de) || de.Field != c.field {
			t.Errorf("%s: %v, want a decode error of %s", c.line, err, c.field)
		}
	}

	// Decide refuses what it cannot keep, naming until.
	_, _, err = NewState().Decide(DefaultLimits(), "d", now, Declare{ID: "z", Text: "x", By: "d", To: "c", Until: time.Date(9999, 1, 1, 0, 0, 0, 1, time.UTC)})
	if r, ok := refuse.As(err); !ok || r.Field != "until" || !strings.Contains(r.Rule, "microsecond") {
		t.Fatalf("declare with a nanosecond in 9999: %v", err)
	}
}
