package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/claim"
	"tally/expect"
	"tally/service"
)

// startTwoWatching starts two nodes whose timekeepers look every 50ms,
// stopped when the test ends, and waits until both vote in every group.
func startTwoWatching(t *testing.T) (*testNode, *testNode) {
	dir := t.TempDir()
	c1 := nodeConfig(t, dir, 1)
	c1.Bootstrap, c1.WatchEvery = true, 50*time.Millisecond
	n1 := startNode(t, c1)
	t.Cleanup(func() { n1.stop(t) })
	c2 := nodeConfig(t, dir, 2)
	c2.Join, c2.WatchEvery = c1.Addr, 50*time.Millisecond
	n2 := startNode(t, c2)
	t.Cleanup(func() { n2.stop(t) })
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 2) })
	return n1, n2
}

// timekeptAgain waits until the timekeeper of every node has run a whole
// pass begun after the call: the event that proves more sweeps came.
func timekeptAgain(t *testing.T, nodes ...*testNode) {
	t.Helper()
	for _, n := range nodes {
		// The pass after the one under way began after this read; the
		// one after that begins once it ended.
		mark := n.timekeeps.Load()
		waitFor(t, "a whole timekeeper pass", 20*time.Second, func() bool { return n.timekeeps.Load() >= mark+2 })
	}
}

// The leader of a group commits the lapse of an expectation past due, on
// every replica, once.
func TestLeaderCommitsLapses(t *testing.T) {
	n1, n2 := startTwoWatching(t)
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
	timekeptAgain(t, n1, n2) // sweeps go on; the lapse stays one
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

// The leader of a group commits a claim's passed deadline (Expired), as
// `tally serve`'s timekeeper does, on every replica, once.
func TestLeaderCommitsClaimDeadlines(t *testing.T) {
	n1, n2 := startTwoWatching(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "main", Actor: "maintainer"}
	create := api.ClaimCreate{Claim: "C1", Respondent: "parser", Work: "w", NoChecks: true, Deadline: rfc3339(time.Now().Add(2 * time.Second))}
	if _, err := retried(func() (service.ClaimWritten, error) { return n2.CreateClaim(ctx, call, create) }); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the claim expired on both nodes", 20*time.Second, func() bool {
		for _, n := range []*testNode{n1, n2} {
			v, err := n.Claim(ctx, service.Call{Tenant: "acme", Session: "main"}, "C1")
			if err != nil || v.Claim.State != claim.Expired {
				return false
			}
		}
		return true
	})
	timekeptAgain(t, n1, n2) // sweeps go on; the fact stays one
	logs := waitSameLogs(t, []*testNode{n1, n2})
	if n := strings.Count(string(logs["acme/main"]), `"type":"claim.deadline"`); n != 1 {
		t.Fatalf("%d deadline facts:\n%s", n, logs["acme/main"])
	}
}
