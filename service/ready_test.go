package service

import (
	"strings"
	"testing"
	"time"

	"tally/claim"
	"tally/promise"
)

// ReadyItems orders by priority, then deadline (none last), then the log's
// order, keeps only the promises the seat owes (not conditional, not
// someone else's), and gives each the command that takes it.
func TestReadyItemsOrder(t *testing.T) {
	at := func(h int) time.Time { return time.Date(2026, 9, 1, h, 0, 0, 0, time.UTC) }
	now := at(12)
	claims := []struct {
		id       string
		priority int
		deadline time.Time
		seq      uint64
	}{
		{"A", 2, time.Time{}, 1}, {"B", 2, at(18), 2}, {"C", 0, time.Time{}, 3}, {"D", 2, at(10), 4}, {"E", 2, time.Time{}, 5},
	}
	var list []claim.Takeable
	for _, c := range claims {
		tk := claim.Takeable{Claim: c.id, Claimant: "m", Work: "w", Priority: c.priority, CreatedSeq: c.seq, Due: c.deadline, Pooled: true}
		if !c.deadline.IsZero() {
			tk.Deadline = c.deadline.Format(time.RFC3339)
		}
		list = append(list, tk)
	}
	promises := []promise.View{
		{ID: "p-late", Promise: "late", By: "w1", To: "m", Until: at(11), State: promise.Owed, Overdue: true, Seq: 6},
		{ID: "p-meta", Promise: "urgent", By: "w1", To: "m", Until: at(20), State: promise.Owed, Meta: `{"priority":1}`, Seq: 7},
		{ID: "p-cond", Promise: "waits", By: "w1", To: "m", Until: at(13), State: promise.Conditional, Seq: 8},
		{ID: "p-other", Promise: "not mine", By: "w2", To: "m", Until: at(13), State: promise.Owed, Seq: 9},
	}
	items := ReadyItems("acme", "main", "w1", list, promises, now)
	var got []string
	for _, it := range items {
		got = append(got, it.ID)
	}
	if strings.Join(got, " ") != "C p-meta D p-late B A E" {
		t.Fatalf("order %v", got)
	}
	if items[1].Command != "tally resolve p-meta --satisfied --evidence REF --session acme/main --as w1" || items[1].Priority != 1 || items[1].From != "m" {
		t.Fatalf("p-meta %+v", items[1])
	}
	if !items[2].Overdue || items[2].Command != "tally receipt acquire D --session acme/main --as w1" {
		t.Fatalf("D %+v", items[2])
	}
}

func TestShellCommand(t *testing.T) {
	for _, tc := range []struct {
		words                 []string
		tenant, session, seat string
		want                  string
	}{
		{[]string{"tally", "receipt", "acquire", "C1"}, "default", "default", "", "tally receipt acquire C1"},
		{[]string{"tally", "receipt", "acquire", "C1"}, "default", "default", "w-1", "tally receipt acquire C1 --as w-1"},
		{[]string{"tally", "resolve", "it's"}, "acme", "main", "a seat", `tally resolve 'it'\''s' --session acme/main --as 'a seat'`},
		{[]string{"tally", "resolve", ""}, "default", "other", "https://example.org/agents/r", "tally resolve '' --session default/other --as https://example.org/agents/r"},
	} {
		if got := ShellCommand(tc.words, tc.tenant, tc.session, tc.seat); got != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}
}
