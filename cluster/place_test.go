package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/promise"
	"tally/rest"
	"tally/service"
)

// otherGroup is a data group of a 4-group cluster other than the
// session's hash's.
func otherGroup(session string) uint64 {
	g := replica.GroupOf(4, "acme", session)
	if g == node.MetaGroup+4 {
		return g - 1
	}
	return g + 1
}

// declareRetrying declares through n, retrying while the group is
// unavailable there (a leader moving).
func declareRetrying(ctx context.Context, t *testing.T, n *Node, call service.Call, text string) (service.PromiseWritten, error) {
	t.Helper()
	doc := api.PromiseDeclare{Promise: text, To: "bob", Until: "2h"}
	res, err := n.DeclarePromise(ctx, call, doc)
	for try := 0; try < 40 && isUnavailable(err); try++ {
		time.Sleep(50 * time.Millisecond)
		res, err = n.DeclarePromise(ctx, call, doc)
	}
	return res, err
}

// A session placed in a group other than its hash's: the refusals change
// nothing; writes through every node land in its group, the same on every
// node; a session with records is not placed; and a node that joins later
// installs the session, its group and its fence by snapshot.
func TestPlaceSession(t *testing.T) {
	nodes := startThree(t)
	secret := nodes[0].cfg.Secret
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const session = "placed"
	g0, to := replica.GroupOf(4, "acme", session), otherGroup(session)
	if _, err := declareRetrying(ctx, t, nodes[0].Node, service.Call{Tenant: "acme", Session: "busy", Actor: "alice", RequestID: "busy-1"}, "first"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		req    PlaceRequest
		secret string
		status int
		want   string
	}{
		{PlaceRequest{Tenant: "acme", Session: session, Group: to}, "another secret of some length", 403, "WrongJoinSecret"},
		{PlaceRequest{Tenant: "acme", Session: session, Group: 9}, secret, 400, "group: 9 is not a data group of this cluster: its data groups are 2 to 5"},
		{PlaceRequest{Tenant: "acme", Session: "a b", Group: to}, secret, 400, `session: \"a b\" must be 1-64 letters`},
		{PlaceRequest{Tenant: "acme", Session: "busy", Group: otherGroup("busy")}, secret, 409,
			fmt.Sprintf("session acme/busy already has 2 records in group %d; moving a session is not supported yet", replica.GroupOf(4, "acme", "busy"))},
	} {
		code, body := post(t, nodes[1].cfg.Addr, PlacePath, Sign(c.secret, nodes[1].target(), c.req))
		if code != c.status || !strings.Contains(body, c.want) {
			t.Fatalf("place %+v: %d %s, want %d with %q", c.req, code, body, c.status, c.want)
		}
	}
	for _, n := range nodes {
		if _, fenced := n.Replica().FencedTo(replica.GroupOf(4, "acme", "busy"), "acme", "busy"); fenced || n.Replica().PlacementCount() != 0 {
			t.Fatalf("node %d: a refused placement changed something", n.ID())
		}
	}

	code, body := post(t, nodes[1].cfg.Addr, PlacePath, Sign(secret, nodes[1].target(), PlaceRequest{Tenant: "acme", Session: session, Group: to}))
	var placed Placed
	if err := json.Unmarshal([]byte(body), &placed); code != 200 || err != nil || placed.Group != to || placed.HashGroup != g0 || !placed.Recorded {
		t.Fatalf("place: %d %s", code, body)
	}
	if code, body := post(t, nodes[2].cfg.Addr, PlacePath, Sign(secret, nodes[2].target(), PlaceRequest{Tenant: "acme", Session: session, Group: to})); code != 200 {
		t.Fatalf("the same placement again: %d %s", code, body)
	}
	if code, body := post(t, nodes[2].cfg.Addr, PlacePath, Sign(secret, nodes[2].target(), PlaceRequest{Tenant: "acme", Session: session, Group: g0})); code != 409 || !strings.Contains(body, "moving a session is not supported yet") {
		t.Fatalf("a placed session placed elsewhere: %d %s", code, body)
	}

	for i := 0; i < 9; i++ {
		n := nodes[i%3]
		call := service.Call{Tenant: "acme", Session: session, Actor: "alice", RequestID: fmt.Sprintf("w%d", i)}
		if _, err := declareRetrying(ctx, t, n.Node, call, fmt.Sprint("p", i)); err != nil {
			t.Fatalf("write %d through node %d: %v", i, n.ID(), err)
		}
	}
	read := service.Call{Tenant: "acme", Session: session, Actor: "alice"}
	for _, n := range nodes {
		l, err := n.ListPromises(ctx, read, promise.Filter{})
		if err != nil || len(l.Promises) != 9 {
			t.Fatalf("node %d reads %d promises: %v", n.ID(), len(l.Promises), err)
		}
	}
	waitFor(t, "the same chains on every node", 20*time.Second, func() bool {
		h := chainHeads(t, nodes[0].Node)
		return equalHeads(h, chainHeads(t, nodes[1].Node)) && equalHeads(h, chainHeads(t, nodes[2].Node))
	})
	for _, n := range nodes {
		if h := n.Replica().Holder("acme", session); h != to {
			t.Errorf("node %d: the session's log is group %d's, want %d", n.ID(), h, to)
		}
	}
	ps, err := nodes[2].ListPlacements(ctx)
	if err != nil || len(ps) != 1 || ps[0] != (replica.Placement{Tenant: "acme", Session: session, Group: to}) {
		t.Fatalf("placements: %+v %v", ps, err)
	}

	n4 := startJoiner(t, t.TempDir(), 4, nodes[0])
	waitFor(t, "four voters in every group", 30*time.Second, func() bool { return allVoters(nodes[0].Node, 4) })
	waitFor(t, "node 4 holding node 1's chains", 20*time.Second, func() bool {
		return equalHeads(chainHeads(t, nodes[0].Node), chainHeads(t, n4.Node))
	})
	if n4.Replica().Restores() == 0 {
		t.Fatal("node 4 installed no snapshot with data")
	}
	if h, g := n4.Replica().Holder("acme", session), n4.Replica().GroupOf("acme", session); h != to || g != to {
		t.Fatalf("node 4 holds the session in group %d and routes it to %d, want %d", h, g, to)
	}
	if g, ok := n4.Replica().FencedTo(g0, "acme", session); !ok || g != to {
		t.Fatalf("node 4: the session is not fenced in group %d", g0)
	}
	if _, err := declareRetrying(ctx, t, n4.Node, service.Call{Tenant: "acme", Session: session, Actor: "alice", RequestID: "late-1"}, "through node 4"); err != nil {
		t.Fatalf("write through node 4: %v", err)
	}
}

// A placement stopped between its steps (the session fenced, the
// directory not told) answers the session's writes 503 Moved once the node
// has waited for the directory; a node that finds the session fenced
// follows it to its group as soon as the directory records the placement;
// and running the placement again completes it.
func TestPlacementBetweenItsSteps(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 1) })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const session = "halfway"
	g0, to := replica.GroupOf(4, "acme", session), otherGroup(session)
	p := replica.Placement{Tenant: "acme", Session: session, Group: to}
	if err := n1.fence(ctx, g0, p); err != nil {
		t.Fatal(err)
	}
	call := service.Call{Tenant: "acme", Session: session, Actor: "alice", RequestID: "r1"}
	_, err := declareRetrying(ctx, t, n1.Node, call, "refused")
	var mv *replica.Moved
	if !errors.As(err, &mv) || !mv.Unrecorded || mv.From != g0 || mv.Group != to {
		t.Fatalf("a write while the placement is not recorded: %v", err)
	}
	if ref := rest.Refuse(err); ref.Status != 503 || ref.Code != replica.CodeMoved || !strings.Contains(ref.Message, "tally cluster place acme/halfway --group") {
		t.Fatalf("answered %d %s %q", ref.Status, ref.Code, ref.Message)
	}
	if _, err := n1.ListPromises(ctx, service.Call{Tenant: "acme", Session: session, Actor: "alice"}, promise.Filter{}); !errors.As(err, &mv) {
		t.Fatalf("a read while the placement is not recorded: %v", err)
	}

	// The directory records it while a write waits for it.
	go func() {
		time.Sleep(300 * time.Millisecond)
		if _, err := n1.Place(ctx, p); err != nil {
			t.Errorf("place again: %v", err)
		}
	}()
	res, err := declareRetrying(ctx, t, n1.Node, call, "followed")
	if err != nil {
		t.Fatalf("a write that followed the session: %v", err)
	}
	if res.Seq == 0 || n1.Replica().Holder("acme", session) != to {
		t.Fatalf("written at %d, held by group %d", res.Seq, n1.Replica().Holder("acme", session))
	}
}
