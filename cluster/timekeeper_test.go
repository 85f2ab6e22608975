package cluster

import (
	"context"
	"testing"
	"time"

	"tally/api"
	"tally/expect"
	"tally/service"
)

// The leader of a group commits the lapse of an expectation past due, on
// every replica, once.
func TestLeaderCommitsLapses(t *testing.T) {
	dir := t.TempDir()
	c1 := nodeConfig(t, dir, 1)
	c1.Bootstrap, c1.WatchEvery = true, 50*time.Millisecond
	n1 := startNode(t, c1)
	defer n1.stop(t)
	c2 := nodeConfig(t, dir, 2)
	c2.Join, c2.WatchEvery = c1.Addr, 50*time.Millisecond
	n2 := startNode(t, c2)
	defer n2.stop(t)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "main", Actor: "agent"}
	due := time.Now().UTC().Add(time.Second)
	raise := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"}, SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"},
		DueAt: rfc3339(due.Add(time.Second)), Grace: "PT0.5S", Basis: "declared"}
	if _, err := n2.RaiseExpectation(ctx, call, raise); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the lapse on both nodes", 20*time.Second, func() bool {
		for _, n := range []*testNode{n1, n2} {
			l, err := n.Lapses(ctx, service.Call{Tenant: "acme", Session: "main"}, service.LapseFilter{})
			if err != nil || len(l.Lapses) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond) // sweeps go on; the lapse stays one
	for _, n := range []*testNode{n1, n2} {
		l, err := n.Lapses(ctx, service.Call{Tenant: "acme", Session: "main"}, service.LapseFilter{})
		if err != nil || len(l.Lapses) != 1 {
			t.Fatalf("node %d lapses: %v %+v", n.ID(), err, l.Lapses)
		}
	}
	if !equalHeads(chainHeads(t, n1.Node), chainHeads(t, n2.Node)) {
		t.Fatal("chains differ")
	}
}
