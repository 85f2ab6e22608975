package cluster

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"tally/cluster/node"
	"tally/cluster/replica"
)

func TestGossipAddrDerived(t *testing.T) {
	for _, c := range []struct{ raft, want string }{
		{"10.0.0.1:7421", "10.0.0.1:7422"},
		{"node1.example:7421", "node1.example:7422"},
		{"[::1]:9000", "[::1]:9001"},
		{"127.0.0.1:65535", "127.0.0.1:65534"},
		{"no port", ""},
		{"h:x", ""},
	} {
		if got := GossipAddr(c.raft); got != c.want {
			t.Errorf("%s: %q, want %q", c.raft, got, c.want)
		}
	}
}

// metaLeader is the meta group's leader as n sees it.
func metaLeader(n *Node) uint64 {
	for _, g := range n.lastStatus() {
		if g.Group == node.MetaGroup {
			return g.Leader
		}
	}
	return 0
}

// A stopped node is settled dead by the detector at the meta group's
// leader, at the incarnation it had; restarted, it speaks at a higher
// incarnation and is settled alive again. Every node holds the same facts.
func TestLivenessStoppedNodeSettledDeadThenAlive(t *testing.T) {
	nodes := startThree(t)
	fact := func(n *Node, id uint64) replica.LivenessFact {
		f, _ := n.Replica().Liveness(id)
		return f
	}
	waitFor(t, "every node settled alive", 20*time.Second, func() bool {
		for _, id := range []uint64{1, 2, 3} {
			if fact(nodes[0].Node, id).State != replica.LivenessAlive {
				return false
			}
		}
		return true
	})
	leader := metaLeader(nodes[0].Node)
	var victim, watcher *testNode
	for _, n := range nodes {
		switch {
		case n.ID() == leader:
			watcher = n
		case victim == nil:
			victim = n
		}
	}
	if watcher == nil {
		t.Fatalf("no meta leader among the nodes (%d)", leader)
	}
	before := fact(watcher.Node, victim.ID())
	stoppedAt := time.Now()
	victim.stop(t)
	waitFor(t, "the stopped node settled dead", 40*time.Second, func() bool {
		f := fact(watcher.Node, victim.ID())
		return f.State == replica.LivenessDead
	})
	dead := fact(watcher.Node, victim.ID())
	t.Logf("settled dead after %v: %+v", time.Since(stoppedAt).Round(100*time.Millisecond), dead)
	if dead.Incarnation != before.Incarnation || dead.Source != replica.LivenessDetector {
		t.Fatalf("dead fact %+v, alive fact before %+v", dead, before)
	}
	row := func(n *Node, id uint64) MemberLiveness {
		for _, m := range n.Members().Members {
			if m.ID == id {
				return m
			}
		}
		return MemberLiveness{}
	}
	waitFor(t, "the members view says dead", 5*time.Second, func() bool { return row(watcher.Node, victim.ID()).State == "dead" })
	if m := row(watcher.Node, victim.ID()); m.Incarnation != dead.Incarnation || m.Settled == nil || *m.Settled != dead {
		t.Errorf("members view of the dead node: %+v", m)
	}
	if m := row(watcher.Node, watcher.ID()); m.State != "alive" || m.HealthScore < 0 || m.HealthScore > 8 {
		t.Errorf("members view of itself: %+v", m)
	}
	var other *testNode
	for _, n := range nodes {
		if n != victim && n != watcher {
			other = n
		}
	}
	// Predicted once enough acknowledged probes of it were seen (memberlist
	// probes each peer in turn, so on a busy machine this can take a while).
	waitFor(t, "a round trip predicted to a live peer", 20*time.Second, func() bool { return row(other.Node, watcher.ID()).RTTKnown })
	if m := row(other.Node, watcher.ID()); !m.RTTKnown || m.RTTMillis <= 0 || m.ProbeDeadlineMillis < 300 || m.ProbeDeadlineMillis > 6000 {
		t.Errorf("members view of a live peer: %+v", m)
	}
	var scrape strings.Builder
	reg := prometheus.NewRegistry()
	reg.MustRegister(gossipCollector{watcher.gossip})
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			fmt.Fprintf(&scrape, "%s{%s} %v\n", mf.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	for _, want := range []string{"tally_liveness_committed_deaths_total{} 1\n", "tally_liveness_grants_total{} 0\n", "tally_liveness_suspicions_total{layer=detector} 1\n"} {
		if !strings.Contains(scrape.String(), want) {
			t.Errorf("metrics lack %q:\n%s", want, scrape.String())
		}
	}
	if watcher.gossip.stats.deaths.Load() != 1 || watcher.gossip.stats.suspicions.Load() < 1 {
		t.Errorf("leader's counters: deaths %d suspicions %d", watcher.gossip.stats.deaths.Load(), watcher.gossip.stats.suspicions.Load())
	}
	// Back, at a higher incarnation.
	cfg := victim.cfg
	cfg.Join, cfg.Bootstrap = "", false
	again := startNode(t, cfg)
	t.Cleanup(func() { again.stop(t) })
	waitFor(t, "the restarted node settled alive", 30*time.Second, func() bool {
		f := fact(watcher.Node, victim.ID())
		return f.State == replica.LivenessAlive && f.Incarnation > dead.Incarnation
	})
	for _, n := range []*testNode{watcher, again} {
		waitFor(t, "the fact applied everywhere", 10*time.Second, func() bool {
			return fact(n.Node, victim.ID()) == fact(watcher.Node, victim.ID())
		})
	}
	// A node alive all along was never settled dead.
	for _, n := range nodes {
		if n != victim && fact(watcher.Node, n.ID()).State != replica.LivenessAlive {
			t.Errorf("node %d: %+v", n.ID(), fact(watcher.Node, n.ID()))
		}
	}
}

// Gossip is keyed by the join secret: a stranger with another secret can
// neither join the gossip nor accuse a member; one holding the cluster's
// key can do both (the control).
func TestGossipStrangerCannotJoinOrAccuse(t *testing.T) {
	nodes := startThree(t)
	waitFor(t, "every node settled alive", 20*time.Second, func() bool {
		for _, id := range []uint64{1, 2, 3} {
			if f, _ := nodes[0].Replica().Liveness(id); f.State != replica.LivenessAlive {
				return false
			}
		}
		return true
	})
	var leader *testNode
	var others []*testNode
	for _, n := range nodes {
		if n.ID() == metaLeader(nodes[0].Node) {
			leader = n
		} else {
			others = append(others, n)
		}
	}
	if leader == nil || len(others) != 2 {
		t.Fatalf("no meta leader among the nodes")
	}
	stranger := func(name, secret string) *memberlist.Memberlist {
		mc := memberlist.DefaultLANConfig()
		mc.Name, mc.BindAddr, mc.BindPort = name, "127.0.0.1", 0
		mc.SecretKey = gossipKey(secret, leader.id.ClusterID)
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
		mc.Label = "tally"
		mc.LogOutput = io.Discard
		ml, err := memberlist.Create(mc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ml.Shutdown() })
		return ml
	}
	accuse := func(ml *memberlist.Memberlist, accused *testNode) {
		f, _ := leader.Replica().Liveness(accused.ID())
		r := report{From: 99, Incarnation: 1, Seq: 1, Suspects: []accusation{{Node: accused.ID(), Incarnation: f.Incarnation, Answered: true}}}
		to := memberlist.Address{Addr: leader.cfg.GossipAddr, Name: fmt.Sprint(leader.ID())}
		if err := ml.SendToAddress(to, append([]byte{msgReport}, mustJSON(r)...)); err != nil {
			t.Fatal(err)
		}
	}
	bad := stranger("98", "another secret, not the cluster's")
	if n, err := bad.Join([]string{leader.cfg.GossipAddr}); err == nil || n != 0 {
		t.Fatalf("a stranger with another secret joined: %d, %v", n, err)
	}
	accuse(bad, others[0])
	good := stranger("99", leader.cfg.Secret)
	if n, err := good.Join([]string{leader.cfg.GossipAddr}); err != nil || n != 1 {
		t.Fatalf("one with the cluster's key did not join: %d, %v", n, err)
	}
	accuse(good, others[1])
	// The keyed accusation, sent after the stranger's, starts a suspicion;
	// the stranger's started none.
	waitFor(t, "the keyed accusation heard", 10*time.Second, func() bool { return leader.gossip.stats.suspicions.Load() >= 1 })
	if got := leader.gossip.stats.suspicions.Load(); got != 1 {
		t.Fatalf("suspicions at the leader: %d, want 1 (the keyed one)", got)
	}
}
