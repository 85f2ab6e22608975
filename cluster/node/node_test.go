package node_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/model"
	"tally/cluster/node"
	"tally/cluster/raftlog"
)

// The simulator's -seed flag is accepted here too, so that
// `go test ./cluster/... -run Sim -seed N` works across the packages.
var _ = flag.Uint64("seed", 0, "simulator seed (used by cluster/sim)")

type fakeClock struct{ t time.Time }

func (c *fakeClock) Now() time.Time { return c.t }

// net is a lossless in-order network between test nodes, with cut links.
type net struct {
	queue []queued
	cut   map[uint64]bool // node id -> isolated
}

// queued is a message on its way; lost is told if a cut drops it.
type queued struct {
	to   uint64
	env  node.Envelope
	lost func()
}

type tr struct {
	n    *net
	from uint64
}

func (t tr) Send(to uint64, batch []node.Envelope) {
	if t.n.cut[t.from] || t.n.cut[to] {
		return
	}
	for _, e := range batch {
		t.n.queue = append(t.n.queue, queued{to: to, env: e})
	}
}

// SendSnapshot carries the body whole in memory; the stream is
// acknowledged once the receiver stepped it, and fails on a cut link.
func (t tr) SendSnapshot(to uint64, s node.OutboundSnapshot) {
	var body bytes.Buffer
	err := s.Write(&body)
	if err == nil && uint64(body.Len()) != s.Size {
		err = fmt.Errorf("body of %d bytes, manifest says %d", body.Len(), s.Size)
	}
	if err != nil || t.n.cut[t.from] || t.n.cut[to] {
		s.Done(fmt.Errorf("snapshot to %d not sent: %v", to, err))
		return
	}
	env := s.Envelope
	env.Snapshot = &node.InboundSnapshot{
		Body:    io.NopCloser(&body),
		Stepped: func(bool) { s.Done(nil) },
	}
	t.n.queue = append(t.n.queue, queued{to: to, env: env, lost: func() { s.Done(fmt.Errorf("snapshot to %d cut", to)) }})
}

type member struct {
	id  uint64
	fs  vfs.FS
	db  *raftlog.DB
	sm  *model.SM
	n   *node.MultiRaft
	ffs *raftlog.FaultFS
}

type cluster struct {
	t       *testing.T
	clock   *fakeClock
	net     *net
	members map[uint64]*member
	ids     []uint64
	cfg     node.Config
}

func testConfig() node.Config {
	cfg := node.DefaultConfig(1)
	cfg.Groups = []uint64{node.MetaGroup, 2}
	cfg.TickInterval = 10 * time.Millisecond
	cfg.ProposalTimeout = time.Second
	cfg.CompactAfter, cfg.CompactKeep = 20, 5
	return cfg
}

func newCluster(t *testing.T, size int) *cluster {
	c := &cluster{t: t, clock: &fakeClock{t: time.Unix(1000, 0)}, net: &net{cut: map[uint64]bool{}}, members: map[uint64]*member{}, cfg: testConfig()}
	for i := 1; i <= size; i++ {
		c.ids = append(c.ids, uint64(i))
	}
	for _, id := range c.ids {
		ffs := raftlog.NewFaultFS(vfs.NewMem())
		c.members[id] = &member{id: id, fs: ffs, ffs: ffs}
		c.start(id)
	}
	t.Cleanup(func() {
		for _, m := range c.members {
			if m.db != nil && m.db.Failed() == nil {
				m.db.Close()
			}
		}
	})
	return c
}

func (c *cluster) start(id uint64) {
	c.startWith(id, func(uint64) []uint64 { return c.ids })
}

// join adds a node that hosts the groups but is in none of their
// configurations yet.
func (c *cluster) join(id uint64) *member {
	c.members[id] = &member{id: id, fs: vfs.NewMem()}
	c.startWith(id, func(uint64) []uint64 { return nil })
	c.ids = append(c.ids, id)
	return c.members[id]
}

func (c *cluster) startWith(id uint64, peers node.Peers) {
	m := c.members[id]
	db, err := raftlog.Open("/d", raftlog.Options{FS: m.fs})
	if err != nil {
		c.t.Fatal(err)
	}
	cfg := c.cfg
	cfg.ID = id
	m.db, m.sm = db, model.New(db)
	m.n, err = node.New(cfg, db, m.sm, tr{c.net, id}, c.clock, peers, nil)
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) restart(id uint64) {
	m := c.members[id]
	if err := m.db.Close(); err != nil {
		c.t.Fatal(err)
	}
	c.start(id)
}

// step ticks every node once and delivers everything in flight.
func (c *cluster) step() {
	c.clock.t = c.clock.t.Add(c.cfg.TickInterval)
	for _, id := range c.ids {
		c.members[id].n.Tick()
		c.members[id].n.Process()
	}
	for len(c.net.queue) > 0 {
		q := c.net.queue
		c.net.queue = nil
		for _, m := range q {
			if c.net.cut[m.to] {
				if m.lost != nil {
					m.lost()
				}
				continue
			}
			c.members[m.to].n.Deliver(m.env)
		}
		for _, id := range c.ids {
			for c.members[id].n.Process() {
			}
		}
	}
}

func (c *cluster) leader(g uint64) *member {
	for i := 0; i < 500; i++ {
		for _, id := range c.ids {
			for _, gt := range c.members[id].n.Leading() {
				if gt.Group == g && !c.net.cut[id] {
					return c.members[id]
				}
			}
		}
		c.step()
	}
	c.t.Fatalf("no leader for group %d", g)
	return nil
}

func (c *cluster) propose(m *member, g uint64, cmd model.Command) node.ProposeResult {
	data, _ := json.Marshal(cmd)
	var res *node.ProposeResult
	m.n.Propose(g, data, func(r node.ProposeResult) { res = &r })
	for i := 0; res == nil && i < 500; i++ {
		c.step()
	}
	if res == nil {
		c.t.Fatal("proposal never answered")
	}
	return *res
}

func TestConfigValidate(t *testing.T) {
	if err := node.DefaultConfig(1).Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	cases := map[string]func(*node.Config){
		"ID must not be 0":          func(c *node.Config) { c.ID = 0 },
		"ElectionTicks must exceed": func(c *node.Config) { c.ElectionTicks = 1 },
		"MaxEntrySize":              func(c *node.Config) { c.MaxEntrySize = 0 },
		"MaxMsgSize":                func(c *node.Config) { c.MaxMsgSize = 1 },
		"listed twice":              func(c *node.Config) { c.Groups = []uint64{1, 1} },
		"MaxPending":                func(c *node.Config) { c.MaxPending = 0 },
		"CompactAfter":              func(c *node.Config) { c.CompactKeep = c.CompactAfter },
	}
	for want, f := range cases {
		c := node.DefaultConfig(1)
		f(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

// TestProposeReadRestartExactlyOnce: a three-node group commits appends,
// answers a linearizable read, and after every node restarts nothing is
// applied twice.
func TestProposeReadRestartExactlyOnce(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	for i := 1; i <= 30; i++ {
		l := c.leader(g)
		// A client per append, so the model's request dedup cannot hide a
		// replayed entry.
		res := c.propose(l, g, model.Command{Session: "s", Client: uint64(i), Req: 1, Value: fmt.Sprint("v", i)})
		if res.Err != nil {
			t.Fatalf("append %d: %v", i, res.Err)
		}
		var r model.Result
		if err := json.Unmarshal(res.Result, &r); err != nil || r.Seq != uint64(i) {
			t.Fatalf("append %d: result %s %v", i, res.Result, err)
		}
	}
	// A retry of the last request returns its recorded outcome.
	res := c.propose(c.leader(g), g, model.Command{Session: "s", Client: 30, Req: 1, Value: "v30"})
	var r model.Result
	if json.Unmarshal(res.Result, &r); !r.Dup || r.Seq != 30 {
		t.Fatalf("retry: %s", res.Result)
	}
	// Read through a follower: it waits for its own apply.
	var follower *member
	for _, id := range c.ids {
		if c.members[id] != c.leader(g) {
			follower = c.members[id]
		}
	}
	var rr *node.ReadResult
	follower.n.ReadIndex(g, func(x node.ReadResult) { rr = &x })
	for i := 0; rr == nil && i < 100; i++ {
		c.step()
	}
	if rr == nil || rr.Err != nil {
		t.Fatalf("read: %+v", rr)
	}
	if recs, _ := follower.sm.Log(g, "s"); len(recs) != 30 {
		t.Fatalf("follower holds %d records after a read, want 30", len(recs))
	}
	for _, id := range c.ids {
		c.restart(id)
	}
	c.propose(c.leader(g), g, model.Command{Session: "s", Client: 31, Req: 1, Value: "v31"})
	for i := 0; i < 20; i++ {
		c.step()
	}
	for _, id := range c.ids {
		recs, err := c.members[id].sm.Log(g, "s")
		if err != nil || len(recs) != 31 {
			t.Fatalf("node %d holds %d records after restart, want 31 (%v)", id, len(recs), err)
		}
		first, _ := mustGroup(t, c.members[id].db, g).FirstIndex()
		if first <= 1 {
			t.Errorf("node %d: log never compacted (first index %d)", id, first)
		}
	}
}

func mustGroup(t *testing.T, db *raftlog.DB, g uint64) *raftlog.Storage {
	s, err := db.Group(g)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLaggingReplicaInstallsSnapshot: a replica cut off while the others
// commit and compact past it catches up by snapshot.
func TestLaggingReplicaInstallsSnapshot(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	c.leader(g)
	c.net.cut[3] = true
	for i := 1; i <= 60; i++ {
		l := c.leader(g)
		if res := c.propose(l, g, model.Command{Session: "s", Client: 1, Req: uint64(i), Value: fmt.Sprint("v", i)}); res.Err != nil {
			t.Fatalf("append %d: %v", i, res.Err)
		}
	}
	l := c.leader(g)
	if first, _ := mustGroup(t, l.db, g).FirstIndex(); first < 30 {
		t.Fatalf("leader's log not compacted past the cut replica (first %d)", first)
	}
	delete(c.net.cut, 3)
	for i := 0; i < 200; i++ {
		c.step()
	}
	want, _ := l.sm.Log(g, "s")
	got, _ := c.members[3].sm.Log(g, "s")
	if len(got) != 60 || string(got[59].Hash) != string(want[59].Hash) {
		t.Fatalf("lagging replica holds %d records, want 60 with the same chain", len(got))
	}
	if first, _ := mustGroup(t, c.members[3].db, g).FirstIndex(); first < 30 {
		t.Fatalf("lagging replica did not install a snapshot (first index %d)", first)
	}
}

// TestDiskFailureStopsServingAndVoting: after an fsync fails the node
// answers every request with ErrFailed and sends nothing, votes included.
func TestDiskFailureStopsServingAndVoting(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	l := c.leader(g)
	var victim *member
	for _, id := range c.ids {
		if c.members[id] != l {
			victim = c.members[id]
			break
		}
	}
	victim.ffs.FailSyncs(true)
	c.propose(l, g, model.Command{Session: "s", Client: 1, Req: 1, Value: "v"})
	for i := 0; i < 10 && victim.n.Failed() == nil; i++ {
		c.step()
	}
	if !errors.Is(victim.n.Failed(), node.ErrFailed) {
		t.Fatalf("node did not stop: %v", victim.n.Failed())
	}
	var res node.ProposeResult
	victim.n.Propose(g, []byte("{}"), func(r node.ProposeResult) { res = r })
	if !errors.Is(res.Err, node.ErrFailed) {
		t.Fatalf("failed node accepted a proposal: %v", res.Err)
	}
	// Isolate the leader so the others campaign; the failed node must not
	// answer (no vote) and must send nothing at all.
	c.net.cut[l.id] = true
	before := len(c.net.queue)
	for i := 0; i < 100; i++ {
		victim.n.Tick()
		victim.n.Process()
	}
	if len(c.net.queue) != before {
		t.Fatal("failed node sent messages")
	}
	for i := 0; i < 100; i++ {
		c.step()
	}
	for _, gt := range append(c.members[1].n.Leading(), append(c.members[2].n.Leading(), c.members[3].n.Leading()...)...) {
		if gt.Group == g {
			t.Fatalf("a group of one live voter out of three elected a leader (term %d)", gt.Term)
		}
	}
}

// TestFailedLeaderNamesTheOthers: a leader stopped by a disk failure no
// longer names itself the group's leader (it sent clients to itself):
// none at first, then the leader the others elect, as their messages show
// it.
func TestFailedLeaderNamesTheOthers(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	l := c.leader(g)
	l.ffs.FailSyncs(true)
	var res *node.ProposeResult
	data, _ := json.Marshal(model.Command{Session: "s", Client: 1, Req: 1, Value: "v"})
	l.n.Propose(g, data, func(r node.ProposeResult) { res = &r })
	for i := 0; i < 10 && l.n.Failed() == nil; i++ {
		c.step()
	}
	if !errors.Is(l.n.Failed(), node.ErrFailed) {
		t.Fatalf("leader did not stop: %v", l.n.Failed())
	}
	if res == nil || !errors.Is(res.Err, node.ErrFailed) {
		t.Fatalf("the failed leader's proposal: %+v", res)
	}
	leaderOf := func() (uint64, raft.StateType) {
		for _, st := range l.n.Status() {
			if st.Group == g {
				return st.Leader, st.State
			}
		}
		t.Fatalf("no group %d in the status", g)
		return 0, 0
	}
	if lead, state := leaderOf(); lead != 0 || state == raft.StateLeader {
		t.Fatalf("the failed leader names node %d (%v) as the leader, want none", lead, state)
	}
	if len(l.n.Leading()) != 0 {
		t.Fatalf("the failed node says it leads %v", l.n.Leading())
	}
	var next uint64
	for i := 0; i < 500 && next == 0; i++ {
		c.step()
		for _, id := range c.ids {
			for _, gt := range c.members[id].n.Leading() {
				if gt.Group == g {
					next = id
				}
			}
		}
	}
	if next == 0 || next == l.id {
		t.Fatalf("the others elected %d", next)
	}
	for i := 0; i < 20; i++ { // heartbeats reach the failed node
		c.step()
	}
	if lead, _ := leaderOf(); lead != next {
		t.Fatalf("the failed node names node %d as the leader, want %d (the others' leader)", lead, next)
	}
}

func TestProposalLimits(t *testing.T) {
	c := newCluster(t, 1)
	m := c.members[1]
	var res node.ProposeResult
	m.n.Propose(2, make([]byte, c.cfg.MaxEntrySize+1), func(r node.ProposeResult) { res = r })
	if !errors.Is(res.Err, node.ErrTooLarge) {
		t.Fatalf("oversized command: %v", res.Err)
	}
	m.n.Propose(99, []byte("x"), func(r node.ProposeResult) { res = r })
	if !errors.Is(res.Err, node.ErrUnknownGroup) {
		t.Fatalf("unknown group: %v", res.Err)
	}
	// Without a leader a read fails at once (raft would drop it silently).
	var rr *node.ReadResult
	m.n.ReadIndex(2, func(r node.ReadResult) { rr = &r })
	m.n.Process()
	if rr == nil || !errors.Is(rr.Err, node.ErrNoLeader) {
		t.Fatalf("read with no leader: %+v", rr)
	}
	// Without a leader (no tick yet, so no election) a proposal waits,
	// then times out.
	answered := false
	m.n.Propose(2, []byte("{}"), func(r node.ProposeResult) { res, answered = r, true })
	m.n.Process()
	if answered {
		t.Fatalf("proposal answered with no leader: %+v", res)
	}
	c.clock.t = c.clock.t.Add(2 * c.cfg.ProposalTimeout)
	m.n.Process()
	if !answered || !errors.Is(res.Err, node.ErrTimeout) || res.Proposed {
		t.Fatalf("timed-out proposal: answered %v, %v, proposed %v (raft never took it: nothing of it can commit)", answered, res.Err, res.Proposed)
	}
}

func change(typ pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}}}
}

func (c *cluster) confChange(m *member, g uint64, cc *pb.ConfChangeV2) node.ConfResult {
	var res *node.ConfResult
	m.n.ProposeConfChange(g, cc, func(r node.ConfResult) { res = &r })
	for i := 0; res == nil && i < 500; i++ {
		c.step()
	}
	if res == nil {
		c.t.Fatal("conf change never answered")
	}
	return *res
}

// TestMembership: a node joins as a learner, catches up (by snapshot, the
// log having been compacted), is promoted, and an old voter is removed;
// the refusals name their reason and change nothing.
func TestMembership(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	for i := 1; i <= 40; i++ {
		if r := c.propose(c.leader(g), g, model.Command{Session: "s", Client: uint64(i), Req: 1, Value: fmt.Sprint("v", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	l := c.leader(g)
	for _, id := range c.ids {
		if m := c.members[id]; m != l {
			if r := c.confChange(m, g, change(pb.ConfChangeType_ConfChangeAddLearnerNode, 4)); !errors.Is(r.Err, node.ErrNotLeader) {
				t.Fatalf("change at a follower: %v", r.Err)
			}
			break
		}
	}
	j := c.join(4)
	var early node.ProposeResult
	j.n.Propose(g, []byte("{}"), func(r node.ProposeResult) { early = r })
	if !errors.Is(early.Err, node.ErrNotMember) {
		t.Fatalf("proposal at a node outside the group: %v", early.Err)
	}
	r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeAddLearnerNode, 4))
	if r.Err != nil || len(r.Conf.GetLearners()) != 1 {
		t.Fatalf("add learner: %+v", r)
	}
	for i := 0; i < 100; i++ {
		c.step()
	}
	if recs, _ := j.sm.Log(g, "s"); len(recs) != 40 {
		t.Fatalf("learner holds %d records, want 40", len(recs))
	}
	var pending node.ConfResult
	l.n.ProposeConfChange(g, change(pb.ConfChangeType_ConfChangeAddNode, 4), func(r node.ConfResult) { pending = r })
	if r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeRemoveNode, 3)); !errors.Is(r.Err, node.ErrConfChangePending) {
		t.Fatalf("second change while one is pending: %v", r.Err)
	}
	for i := 0; i < 20; i++ {
		c.step()
	}
	if pending.Err != nil || len(pending.Conf.GetVoters()) != 4 {
		t.Fatalf("promote: %+v", pending)
	}
	l = c.leader(g)
	victim := uint64(1)
	if l.id == 1 {
		victim = 2
	}
	if r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeRemoveNode, victim)); r.Err != nil || len(r.Conf.GetVoters()) != 3 {
		t.Fatalf("remove a voter: %+v", r)
	}
	if r := c.propose(c.leader(g), g, model.Command{Session: "s", Client: 99, Req: 1, Value: "after"}); r.Err != nil {
		t.Fatal(r.Err)
	}
}

func TestRemovingTheLastVoterIsRefused(t *testing.T) {
	c := newCluster(t, 1)
	l := c.leader(2)
	if r := c.confChange(l, 2, change(pb.ConfChangeType_ConfChangeRemoveNode, 1)); !errors.Is(r.Err, node.ErrLastVoter) {
		t.Fatalf("remove the last voter: %v", r.Err)
	}
	if st := l.n.Status(); len(st[1].Voters) != 1 {
		t.Fatalf("voters after a refused removal: %v", st[1].Voters)
	}
}

// TestChangeThatWouldLoseQuorumIsRefused: five voters, two cut off; the
// leader still has a quorum, but removing a reachable voter would leave two
// reachable of four.
func TestChangeThatWouldLoseQuorumIsRefused(t *testing.T) {
	c := newCluster(t, 5)
	const g = 2
	l := c.leader(g)
	var reachable []uint64
	cut := 0
	for _, id := range c.ids {
		if id == l.id {
			continue
		}
		if cut < 2 {
			c.net.cut[id] = true
			cut++
		} else {
			reachable = append(reachable, id)
		}
	}
	for i := 0; i < 3*c.cfg.ElectionTicks; i++ {
		c.step()
	}
	if len(l.n.Leading()) == 0 {
		t.Fatal("the leader lost its quorum of 3 of 5")
	}
	r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeRemoveNode, reachable[0]))
	if !errors.Is(r.Err, node.ErrWouldLoseQuorum) {
		t.Fatalf("removal leaving 2 reachable of 4: %v", r.Err)
	}
	if st := l.n.Status(); len(st[1].Voters) != 5 {
		t.Fatalf("voters after the refusal: %v", st[1].Voters)
	}
}

func TestRestartOnAnotherNodesDirectoryIsRefused(t *testing.T) {
	c := newCluster(t, 1)
	m := c.members[1]
	cfg := c.cfg
	cfg.ID = 7
	_, err := node.New(cfg, m.db, m.sm, tr{c.net, 7}, c.clock, func(uint64) []uint64 { return []uint64{7} }, nil)
	if !errors.Is(err, raftlog.ErrIdentity) {
		t.Fatalf("node 7 on node 1's store: %v", err)
	}
}

// A proposal a follower handed to a leader that then died fails as soon as
// another leader is elected, not at its deadline: its client retries it
// (under its request id) through the failover instead of waiting it out.
func TestProposalHandedToADeadLeaderFailsAtTheLeaderChange(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	old := c.leader(g)
	var follower *member
	for _, id := range c.ids {
		if id != old.id {
			follower = c.members[id]
			break
		}
	}
	c.net.cut[old.id] = true // its messages go nowhere from now on
	data, _ := json.Marshal(model.Command{Session: "s", Client: 1, Req: 1, Value: "v"})
	var res *node.ProposeResult
	start := c.clock.t
	follower.n.Propose(g, data, func(r node.ProposeResult) { res = &r })
	for i := 0; res == nil && i < 500; i++ {
		c.step()
	}
	if res == nil || !errors.Is(res.Err, node.ErrLeaderChanged) || !res.Proposed {
		t.Fatalf("proposal through node %d to the cut leader %d: %+v, want ErrLeaderChanged, proposed (its outcome unknown)", follower.id, old.id, res)
	}
	if waited := c.clock.t.Sub(start); waited >= c.cfg.ProposalTimeout {
		t.Fatalf("failed after %v, not before the %v deadline", waited, c.cfg.ProposalTimeout)
	}
}

// TestJointReplaceOfADeadVoter: a caught-up learner is promoted and a
// dead voter removed in one ConfChangeV2. The change enters a joint
// configuration (the old voters and the new each a quorum), which refuses
// any other change until raft has left it by itself; the group then
// commits with the new voters, the dead one still cut off.
func TestJointReplaceOfADeadVoter(t *testing.T) {
	c := newCluster(t, 3)
	const g = 2
	for i := 1; i <= 20; i++ {
		if r := c.propose(c.leader(g), g, model.Command{Session: "s", Client: uint64(i), Req: 1, Value: fmt.Sprint("v", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	l := c.leader(g)
	j := c.join(4)
	if r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeAddLearnerNode, 4)); r.Err != nil {
		t.Fatalf("add learner: %+v", r)
	}
	for i := 0; i < 100; i++ {
		c.step()
	}
	if recs, _ := j.sm.Log(g, "s"); len(recs) != 20 {
		t.Fatalf("learner holds %d records, want 20", len(recs))
	}
	victim := uint64(1)
	for victim == l.id {
		victim++
	}
	c.net.cut[victim] = true
	for i := 0; i < 3*c.cfg.ElectionTicks; i++ {
		c.step()
	}
	l = c.leader(g)
	add, remove := pb.ConfChangeType_ConfChangeAddNode, pb.ConfChangeType_ConfChangeRemoveNode
	joint := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &add, NodeId: new(uint64(4))}, {Type: &remove, NodeId: new(victim)}}}
	var res *node.ConfResult
	l.n.ProposeConfChange(g, joint, func(r node.ConfResult) { res = &r })
	for i := 0; res == nil && i < 500; i++ {
		c.members[l.id].n.Process()
		for len(c.net.queue) > 0 {
			q := c.net.queue
			c.net.queue = nil
			for _, m := range q {
				if !c.net.cut[m.to] {
					c.members[m.to].n.Deliver(m.env)
				}
			}
			for _, id := range c.ids {
				if !c.net.cut[id] {
					c.members[id].n.Process()
				}
			}
			if res != nil {
				break
			}
		}
	}
	if res == nil || res.Err != nil {
		t.Fatalf("joint replace: %+v", res)
	}
	want := []uint64{}
	for _, id := range []uint64{1, 2, 3, 4} {
		if id != victim {
			want = append(want, id)
		}
	}
	if got := sortedIDs(res.Conf.GetVoters()); fmt.Sprint(got) != fmt.Sprint(want) || len(res.Conf.GetLearners()) != 0 {
		t.Fatalf("voters after the joint change %v, learners %v; want %v", got, res.Conf.GetLearners(), want)
	}
	if len(res.Conf.GetVotersOutgoing()) != 3 {
		t.Fatalf("the change did not enter a joint configuration: %+v", res.Conf)
	}
	// Still joint as the change applied: no other change until raft has
	// left it.
	if r := c.confChange(l, g, change(pb.ConfChangeType_ConfChangeRemoveNode, 4)); !errors.Is(r.Err, node.ErrConfChangePending) {
		t.Fatalf("a change while joint: %v", r.Err)
	}
	for i := 0; i < 50; i++ {
		c.step()
	}
	st := c.leader(g).n.Status()[1]
	if len(st.Leaving) != 0 || fmt.Sprint(sortedIDs(st.Voters)) != fmt.Sprint(want) {
		t.Fatalf("after the joint change: voters %v, leaving %v", st.Voters, st.Leaving)
	}
	if r := c.propose(c.leader(g), g, model.Command{Session: "s", Client: 99, Req: 1, Value: "after"}); r.Err != nil {
		t.Fatalf("a write with the replaced voter still cut off: %v", r.Err)
	}
}

func sortedIDs(ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}
