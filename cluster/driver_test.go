package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/promise"
	"tally/service"
)

// A cluster made without a replication factor (as before it existed) has
// every member a voter of every group; configured to 3, every data group
// comes down to 3 voters, the meta group to 3 with the fourth node its
// learner, each decision recorded and done, and every write made before
// is still there, read through every node (a node outside a group names
// its leader, where the read goes).
func TestConfigureBringsAnAllVotersClusterToItsFactor(t *testing.T) {
	dir := t.TempDir()
	n1 := startFirst(t, dir)
	nodes := []*testNode{n1, startJoiner(t, dir, 2, n1), startJoiner(t, dir, 3, n1), startJoiner(t, dir, 4, n1)}
	waitFor(t, "four voters in every group", 30*time.Second, func() bool { return allVoters(n1.Node, 4) })
	if p := n1.Replica().Policy(); p.Replicas != 0 {
		t.Fatalf("a cluster made without a factor records %d", p.Replicas)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wrote := map[string]int{}
	for i := range 24 {
		call := service.Call{Tenant: "acme", Session: fmt.Sprintf("s%d", i%8), Actor: "alice", RequestID: fmt.Sprintf("r%d", i)}
		n := nodes[i%4]
		_, err := n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
		for try := 0; try < 40 && isUnavailable(err); try++ {
			time.Sleep(50 * time.Millisecond)
			_, err = n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
		}
		if err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		wrote[call.Session]++
	}

	// Refused with nothing recorded: an even factor.
	code, body := post(t, n1.cfg.Addr, ConfigurePath, Sign(n1.cfg.Secret, n1.target(), ConfigureRequest{Replicas: 4}))
	if code != 400 || n1.Replica().Policy().Replicas != 0 {
		t.Fatalf("configure 4: %d %s; factor %d", code, body, n1.Replica().Policy().Replicas)
	}
	code, body = post(t, n1.cfg.Addr, ConfigurePath, Sign(n1.cfg.Secret, n1.target(), ConfigureRequest{Replicas: 3}))
	if code != 200 || body != `{"replicas":3,"was":0}`+"\n" {
		t.Fatalf("configure 3: %d %s", code, body)
	}
	waitFor(t, "every group at its goal, recorded, nothing in flight", 60*time.Second, func() bool {
		st, err := n1.Status(ctx)
		if err != nil || len(st.Placement.Groups) != 5 {
			return false
		}
		for _, g := range st.Placement.Groups {
			learners := 0
			if g.Group == node.MetaGroup {
				learners = 1
			}
			if !g.Recorded || len(g.Voters) != 3 || len(g.Learners) != learners || g.InFlight != nil || g.Short != "" {
				return false
			}
		}
		return true
	})
	pol := n1.Replica().Policy()
	if len(pol.Decisions) == 0 || slices.ContainsFunc(pol.Decisions, func(d replica.Decision) bool { return d.State == replica.DecisionInFlight }) {
		t.Fatalf("decisions: %+v", pol.Decisions)
	}
	byAddr := map[string]*testNode{}
	for _, n := range nodes {
		byAddr[n.cfg.Addr] = n
	}
	list := func(n *testNode, session string) (int, error) {
		res, err := n.ListPromises(ctx, service.Call{Tenant: "acme", Session: session, Actor: "alice"}, promise.Filter{State: promise.FilterAll})
		return len(res.Promises), err
	}
	for session, want := range wrote {
		for _, n := range nodes {
			got, err := list(n, session)
			for try := 0; try < 40 && isUnavailable(err); try++ {
				var u *Unavailable
				if errors.As(err, &u) && errors.Is(err, node.ErrNotMember) && byAddr[u.LeaderAddr] != nil {
					// Not placed here: the refusal names the group's
					// leader, where the read goes.
					n = byAddr[u.LeaderAddr]
				} else {
					time.Sleep(50 * time.Millisecond)
				}
				got, err = list(n, session)
			}
			if err != nil || got != want {
				t.Fatalf("session %s through node %d: %d promises, want %d (%v)", session, n.ID(), got, want, err)
			}
		}
	}
}

// startSingleReplicas starts two nodes, the first bootstrapping at
// --replicas 1, so each data group has one voter; it is the first.
func startSingleReplicas(t *testing.T) *testNode {
	t.Helper()
	dir := t.TempDir()
	c1 := nodeConfig(t, dir, 1)
	c1.Bootstrap, c1.Replicas = true, 1
	n1 := startNode(t, c1)
	t.Cleanup(func() { n1.stop(t) })
	startJoiner(t, dir, 2, n1)
	return n1
}

// With one replica, a node holding a group's only voter cannot be marked
// dead (nothing could replace its copy), nor can the node asked; an
// unknown node is not found. Each refusal records nothing.
func TestMarkDeadRefusals(t *testing.T) {
	n1 := startSingleReplicas(t)
	waitFor(t, "a group whose only voter is node 2", 30*time.Second, func() bool {
		for _, conf := range n1.Replica().Policy().Groups {
			if slices.Equal(conf.Voters, []uint64{2}) {
				return true
			}
		}
		return false
	})
	for _, tc := range []struct {
		id     uint64
		status int
		want   string
	}{
		{2, 409, "node 2 is the last voter of group"},
		{1, 409, "node 1 is the node asked"},
		{9, 404, "node 9 is not a member"},
	} {
		code, body := post(t, n1.cfg.Addr, MarkDeadPath, Sign(n1.cfg.Secret, n1.target(), MarkDeadRequest{ID: tc.id}))
		if code != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("mark-dead %d: %d %s, want %d with %q", tc.id, code, body, tc.status, tc.want)
		}
	}
	// The failure detector may have recorded node 2 alive; a refused
	// mark-dead records nothing dead.
	if f, ok := n1.Replica().Liveness(2); ok && f.State == replica.LivenessDead {
		t.Fatalf("a refused mark-dead recorded a fact: %+v", f)
	}
}

// A node that does not hold a session's group passes a request about it to
// one that does: a plain HTTP client, which follows no leader, is answered
// through any node, and the record is in the group that holds the session.
func TestRequestForwardedToTheSessionsGroup(t *testing.T) {
	n1 := startSingleReplicas(t)
	var session string
	waitFor(t, "a session whose group only node 2 holds, as node 1 knows", 30*time.Second, func() bool {
		for i := range 64 {
			s := fmt.Sprintf("s%d", i)
			if conf, ok := n1.Replica().Policy().Groups[n1.Replica().GroupOf("acme", s)]; ok && slices.Equal(conf.Voters, []uint64{2}) && len(conf.Learners) == 0 {
				session = s
				return true
			}
		}
		return false
	})
	if _, ok := n1.Forward("acme", session); !ok {
		t.Fatalf("node 1 would serve acme/%s itself", session)
	}
	path := "/v1/tenants/acme/sessions/" + session + "/promises"
	req, err := http.NewRequest("POST", "http://"+n1.cfg.Addr+path, strings.NewReader(`{"id":"p1","promise":"forwarded","to":"lead","until":"2030-01-01T00:00:00Z"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tally-Actor", "agent")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusCreated || !strings.Contains(string(body), `"forwarded"`) {
		t.Fatalf("a declaration through node 1: %d %s", res.StatusCode, body)
	}
	if _, err := n1.Replica().Open(context.Background(), "acme", session, false); err == nil {
		t.Fatalf("node 1 holds a replica of acme/%s", session)
	}
}
