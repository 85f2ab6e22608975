package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"tally/api"
	"tally/expect"
	"tally/service"
)

// The expectation family through a node: every write is proposed and
// applied by the replica's Local (its path's id carried in the command),
// a relative time is read at the proposer, a retry under the same request
// id replays the first answer, and the reads see the writes.
func TestExpectationsThroughANode(t *testing.T) {
	n := startAlone(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(actor, rid string) service.Call {
		return service.Call{Tenant: "acme", Session: "main", Actor: actor, RequestID: rid}
	}
	now := time.Now().UTC()
	raise := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"}, SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"},
		DueAt: "2h", Basis: "declared", Origin: &expect.Origin{TaskID: "t1"}, RelativeTo: now}
	w, err := n.RaiseExpectation(ctx, as("agent", "r1"), raise)
	if err != nil || w.Expectation.State != "open" || !w.Expectation.CurrentDue.Equal(now.Add(2*time.Hour).Truncate(time.Second)) {
		t.Fatalf("raise: %v %+v", err, w.Expectation)
	}
	again, err := n.RaiseExpectation(ctx, as("agent", "r1"), raise)
	if err != nil || !again.Replayed || !bytes.Equal(again.JSON, w.JSON) {
		t.Fatalf("a retry: %v replayed=%v\n%s\n%s", err, again.Replayed, again.JSON, w.JSON)
	}
	ext, err := n.SupersedeExpectation(ctx, as("agent", ""), "e1", api.ExpectRaise{ExpectationID: "e2", DueAt: rfc3339(now.Add(3 * time.Hour))})
	if err != nil || ext.Expectation.Supersedes != "e1" || ext.Expectation.Kind != "k" {
		t.Fatalf("supersede: %v %+v", err, ext.Expectation)
	}
	raise.ExpectationID, raise.SatisfiedBy = "e3", &api.FactKeyRef{FactKey: "f:3"}
	if _, err := n.RaiseExpectation(ctx, as("agent", ""), raise); err != nil {
		t.Fatal(err)
	}
	f, err := n.RecordFact(ctx, as("feed", ""), api.ExpectFact{FactKey: "f:1", Subject: &expect.Subject{Type: "s", ID: "1"}})
	if err != nil || len(f.Satisfied) != 1 || f.Satisfied[0] != "e2" || f.Fact.By != "feed" {
		t.Fatalf("fact: %v %+v", err, f)
	}
	if _, err := n.WithdrawExpectation(ctx, as("other", ""), "e3", api.ExpectWithdraw{}); err == nil {
		t.Fatal("a stranger withdrew")
	}
	o, err := n.RecordTaskOutcome(ctx, as("agent", ""), "t1", api.ExpectTaskOutcome{Outcome: "cancelled"})
	if err != nil || len(o.Withdrawn) != 1 || o.Withdrawn[0] != "e3" || o.Task.TaskID != "t1" {
		t.Fatalf("task outcome: %v %+v", err, o)
	}
	read := as("", "")
	list, err := n.ListExpectations(ctx, read, expect.Filter{})
	if err != nil || len(list.Expectations) != 3 {
		t.Fatalf("list: %v %+v", err, list)
	}
	if v, err := n.Expectation(ctx, read, "e3"); err != nil || v.Expectation.State != "withdrawn" {
		t.Fatalf("show: %v %+v", err, v)
	}
	if ls, err := n.Lapses(ctx, read, service.LapseFilter{}); err != nil || len(ls.Lapses) != 0 {
		t.Fatalf("lapses: %v %+v", err, ls)
	}
	if _, err := n.CommitLapse(ctx, as("agent", ""), api.ExpectLapse{ExpectationID: "e2", Lapse: "overdue"}); err == nil {
		t.Fatal("an agent committed a lapse")
	}
}

func rfc3339(t time.Time) string { return t.Truncate(time.Second).Format(time.RFC3339) }

// An expectation raised without an id gets one id on every replica: the
// replicas mint it from the command's seed, as they mint promise ids, so
// their logs are the same bytes; a retry under the same request id, still
// without an id, is answered with the first.
func TestAnExpectationWithoutIDIsOneOnEveryReplica(t *testing.T) {
	n1, n2 := twoVoters(t)
	defer n2.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "main", Actor: "agent", RequestID: "raise-1"}
	raise := api.ExpectRaise{Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"}, SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"},
		DueAt: rfc3339(time.Now().Add(time.Hour)), Basis: "declared"}
	w, err := n1.RaiseExpectation(ctx, call, raise)
	if err != nil || w.Expectation.ExpectationID == "" {
		t.Fatalf("raise: %v %+v", err, w.Expectation)
	}
	again, err := n2.RaiseExpectation(ctx, call, raise)
	if err != nil || !again.Replayed || again.Expectation.ExpectationID != w.Expectation.ExpectationID {
		t.Fatalf("the retry through node 2: %v replayed=%v %q, first %q", err, again.Replayed, again.Expectation.ExpectationID, w.Expectation.ExpectationID)
	}
	for _, n := range []*testNode{n1, n2} {
		v, err := n.Expectation(ctx, service.Call{Tenant: "acme", Session: "main"}, w.Expectation.ExpectationID)
		if err != nil || v.Expectation.ExpectationID != w.Expectation.ExpectationID {
			t.Fatalf("node %d holds no expectation %s: %v", n.ID(), w.Expectation.ExpectationID, err)
		}
	}
	if h1, h2 := chainHeads(t, n1.Node), chainHeads(t, n2.Node); !equalHeads(h1, h2) {
		t.Fatalf("the replicas' chains differ: node 1 %v, node 2 %v", h1, h2)
	}
}
