package promise

import (
	"slices"
	"testing"
)

// Select's Task keeps the promises a task id can name (task field or id),
// with the other members of the filter still applied, in declaration order.
func TestSelectTask(t *testing.T) {
	s := fold(t,
		`{"ts":"2026-08-28T20:00:00Z","type":"promise","id":"p1","promise":"x","by":"a","to":"b","until":"2026-09-01T17:00:00Z","task":"t1"}`,
		`{"ts":"2026-08-28T20:01:00Z","type":"promise","id":"t1","promise":"x","by":"b","to":"a","until":"2026-09-01T17:00:00Z"}`,
		`{"ts":"2026-08-28T20:02:00Z","type":"promise","id":"p3","promise":"x","by":"a","to":"b","until":"2026-09-01T17:00:00Z","task":"t3"}`,
		`{"ts":"2026-08-28T20:03:00Z","type":"promise","id":"p4","promise":"x","by":"a","to":"b","until":"2026-08-29T17:00:00Z","task":"t4"}`,
		`{"ts":"2026-08-28T20:04:00Z","type":"resolve","promise":"p3","as":"satisfied","by":"a","evidence":["e"]}`,
	)
	now := ts("2026-08-30T00:00:00Z")
	cases := []struct {
		name string
		f    Filter
		want []string
	}{
		{"task field and id both match", Filter{State: "all", Task: "t1"}, []string{"p1", "t1"}},
		{"by narrows the task's promises", Filter{State: "all", Task: "t1", By: "b"}, []string{"t1"}},
		{"to narrows the task's promises", Filter{State: "all", Task: "t1", To: "b"}, []string{"p1"}},
		{"an id with a task of its own", Filter{State: "all", Task: "p1"}, []string{"p1"}},
		{"a resolved promise under all", Filter{State: "all", Task: "t3"}, []string{"p3"}},
		{"a resolved promise is not open", Filter{State: "open", Task: "t3"}, nil},
		{"overdue and its task", Filter{State: "overdue", Task: "t4"}, []string{"p4"}},
		{"overdue, another task", Filter{State: "overdue", Task: "t1"}, nil},
		{"no promise has the task", Filter{State: "all", Task: "nope"}, nil},
		{"no task keeps every promise", Filter{State: "all"}, []string{"p1", "t1", "p3", "p4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, v := range s.Select(c.f, now) {
				got = append(got, v.ID)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Select(%+v) = %v, want %v", c.f, got, c.want)
			}
		})
	}
}
