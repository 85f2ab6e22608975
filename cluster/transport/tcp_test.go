package transport

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/model"
	"tally/cluster/node"
	"tally/cluster/raftlog"
	"tally/internal/poll"
)

var _ = flag.Uint64("seed", 0, "simulator seed (used by cluster/sim)")

func cfgFor(id uint64, cluster, secret string) Config {
	c := DefaultConfig()
	c.NodeID, c.ClusterID, c.Secret, c.Listen = id, cluster, []byte(secret), "127.0.0.1:0"
	c.RedialDelay = 20 * time.Millisecond
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 10*time.Second, cond)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// tcpNode is a real node on a TCP transport, its loop on a goroutine.
type tcpNode struct {
	tr    *TCP
	db    *raftlog.DB
	sm    *model.SM
	calls chan func(*node.MultiRaft)
	spool string
}

// tcpCluster runs real nodes, each with its own loop goroutine, store,
// spool directory and listener on 127.0.0.1, until the test ends.
type tcpCluster struct {
	t      *testing.T
	ctx    context.Context
	wg     sync.WaitGroup
	nodes  map[uint64]*tcpNode
	secret string
}

func newTCPCluster(t *testing.T) *tcpCluster {
	ctx, cancel := context.WithCancel(context.Background())
	c := &tcpCluster{t: t, ctx: ctx, nodes: map[uint64]*tcpNode{}, secret: "a join secret of some length"}
	// The stores close last: a snapshot stream still under way reads one.
	t.Cleanup(func() {
		cancel()
		c.wg.Wait()
		for _, n := range c.nodes {
			n.tr.Close()
		}
		for _, n := range c.nodes {
			n.db.Close()
		}
	})
	return c
}

// start runs node id in groups MetaGroup and 2, with voters as the
// groups' first voters (none: it joins later), every other node its peer.
func (c *tcpCluster) start(id uint64, voters []uint64, tune func(*node.Config)) *tcpNode {
	t := c.t
	tc := cfgFor(id, "c1", c.secret)
	tc.SpoolDir = t.TempDir()
	tr, err := Listen(tc, nil)
	if err != nil {
		t.Fatal(err)
	}
	for oid, o := range c.nodes {
		tr.AddPeer(oid, o.tr.Addr())
		o.tr.AddPeer(id, tr.Addr())
	}
	db, err := raftlog.Open("/d", raftlog.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := node.DefaultConfig(id)
	cfg.Groups = []uint64{node.MetaGroup, 2}
	cfg.TickInterval = 10 * time.Millisecond
	if tune != nil {
		tune(&cfg)
	}
	tn := &tcpNode{tr: tr, db: db, sm: model.New(db), calls: make(chan func(*node.MultiRaft)), spool: tc.SpoolDir}
	n, err := node.New(cfg, db, tn.sm, tr, realClock{}, func(uint64) []uint64 { return voters }, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[id] = tn
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		n.Run(c.ctx, tr.Inbox(), tn.calls)
	}()
	return tn
}

// append commits value to session s in group 2 through node via, retrying
// while the group has no leader.
func (c *tcpCluster) append(via uint64, req uint64, value string) {
	for attempt := 0; ; attempt++ {
		done := make(chan node.ProposeResult, 1)
		cmd, _ := json.Marshal(model.Command{Session: "s", Client: via, Req: req, Value: value})
		c.nodes[via].calls <- func(n *node.MultiRaft) { n.Propose(2, cmd, func(r node.ProposeResult) { done <- r }) }
		r := <-done
		if r.Err == nil {
			return
		}
		if attempt > 50 {
			c.t.Fatalf("append %s via %d: %v", value, via, r.Err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// log reads session s of group 2 at a node, on its loop.
func (c *tcpCluster) log(id uint64) []model.Record {
	ch := make(chan []model.Record, 1)
	c.nodes[id].calls <- func(*node.MultiRaft) {
		recs, _ := c.nodes[id].sm.Log(2, "s")
		ch <- recs
	}
	return <-ch
}

// startThree starts nodes 1–3, the groups' voters, and commits total
// appends through each in turn (a node forwards to the leader).
func (c *tcpCluster) startThree(total int, tune func(*node.Config)) []uint64 {
	ids := []uint64{1, 2, 3}
	for _, id := range ids {
		c.start(id, ids, tune)
	}
	for i := 1; i <= total; i++ {
		c.append(ids[i%3], uint64(i), fmt.Sprint("v", i))
	}
	return ids
}

// TestThreeNodesReplicateOverTCP runs three real nodes and requires every
// acknowledged append on every node with identical chains.
func TestThreeNodesReplicateOverTCP(t *testing.T) {
	c := newTCPCluster(t)
	const total = 60
	ids := c.startThree(total, nil)
	waitFor(t, "every node to apply every append", func() bool {
		for _, id := range ids {
			if len(c.log(id)) != total {
				return false
			}
		}
		return true
	})
	ref := c.log(1)
	for _, id := range ids[1:] {
		got := c.log(id)
		if string(got[total-1].Hash) != string(ref[total-1].Hash) {
			t.Fatalf("node %d's chain differs from node 1's", id)
		}
	}
	for _, id := range ids {
		if st := &c.nodes[id].tr.Stats; st.SentBatches.Load() == 0 || st.ReceivedBatches.Load() == 0 {
			t.Fatalf("node %d sent or received nothing", id)
		}
	}
}

// TestNewNodeInstallsSnapshotOverTCP: a node added to a group whose log
// was compacted past its start receives the group's snapshot on a stream,
// restores it from the spool, which is then gone, and holds the same chain.
func TestNewNodeInstallsSnapshotOverTCP(t *testing.T) {
	c := newTCPCluster(t)
	compact := func(cfg *node.Config) { cfg.CompactAfter, cfg.CompactKeep = 20, 5 }
	const total = 60
	ids := c.startThree(total, compact)
	n4 := c.start(4, nil, compact)
	add := &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(uint64(4))}}}
	waitFor(t, "node 4 added to group 2 at its leader", func() bool {
		for _, id := range ids {
			done := make(chan node.ConfResult, 1)
			c.nodes[id].calls <- func(n *node.MultiRaft) { n.ProposeConfChange(2, add, func(r node.ConfResult) { done <- r }) }
			if r := <-done; r.Err == nil {
				return true
			}
		}
		return false
	})
	waitFor(t, "node 4 to hold every append", func() bool { return len(c.log(4)) == total })
	if got, want := c.log(4), c.log(1); string(got[total-1].Hash) != string(want[total-1].Hash) {
		t.Fatal("node 4's chain differs from node 1's")
	}
	if n4.tr.Stats.SnapshotsReceived.Load() == 0 || n4.tr.Stats.SnapshotBytesReceived.Load() == 0 {
		t.Fatalf("node 4 caught up without a snapshot with a body: %d received, %d bytes",
			n4.tr.Stats.SnapshotsReceived.Load(), n4.tr.Stats.SnapshotBytesReceived.Load())
	}
	if left := spools(t, n4.spool); len(left) != 0 {
		t.Fatalf("spools left after the install: %v", left)
	}
}

func spools(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func heartbeat(from, to uint64) []node.Envelope {
	return []node.Envelope{{Group: 1, Msg: &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), From: new(from), To: new(to), Term: new(uint64(1))}}}
}

// TestPeersWithAnotherSecretOrClusterAreRefused: nothing from a peer that
// fails the handshake reaches the inbox.
func TestPeersWithAnotherSecretOrClusterAreRefused(t *testing.T) {
	for name, other := range map[string]Config{
		"secret":  cfgFor(2, "c1", "another secret, also long"),
		"cluster": cfgFor(2, "c2", "the shared secret for c1"),
	} {
		t.Run(name, func(t *testing.T) {
			srv, err := Listen(cfgFor(1, "c1", "the shared secret for c1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			cli, err := Listen(other, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			cli.AddPeer(1, srv.Addr())
			cli.Send(1, heartbeat(2, 1))
			waitFor(t, "a refusal", func() bool { return srv.Stats.RefusedPeers.Load() > 0 })
			// A peer of the cluster sends after the refusal: its batch is
			// the first the inbox holds, none of the refused peer's before.
			good, err := Listen(cfgFor(3, "c1", "the shared secret for c1"), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer good.Close()
			good.AddPeer(1, srv.Addr())
			good.Send(1, heartbeat(3, 1))
			select {
			case b := <-srv.Inbox():
				if len(b) != 1 || b[0].Msg.GetFrom() != 3 {
					t.Fatalf("refused peer's batch delivered: %v", b)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("the cluster peer's batch never arrived")
			}
		})
	}
	// The same pair with matching identity gets through.
	srv, _ := Listen(cfgFor(1, "c1", "the shared secret for c1"), nil)
	defer srv.Close()
	cli, _ := Listen(cfgFor(2, "c1", "the shared secret for c1"), nil)
	defer cli.Close()
	cli.AddPeer(1, srv.Addr())
	cli.Send(1, heartbeat(2, 1))
	select {
	case b := <-srv.Inbox():
		if len(b) != 1 || b[0].Msg.GetType() != pb.MessageType_MsgHeartbeat {
			t.Fatalf("got %v", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("authenticated peer's batch never arrived")
	}
}

// TestSendNeverBlocks: a peer that is not there costs at most QueueLen
// batches; the rest are dropped, and so is a batch over MaxFrameSize.
func TestSendNeverBlocks(t *testing.T) {
	cfg := cfgFor(1, "c1", "the shared secret for c1")
	cfg.QueueLen = 8
	cfg.MaxFrameSize = 4096
	tr, err := Listen(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.AddPeer(2, "127.0.0.1:1") // nothing listens there
	start := time.Now()
	for i := 0; i < 1000; i++ {
		tr.Send(2, heartbeat(1, 2))
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("1000 sends to a dead peer took %v", d)
	}
	if got := tr.Stats.Dropped.Load(); got < 1000-8-1 {
		t.Fatalf("dropped %d of 1000 batches with a queue of 8", got)
	}
	before := tr.Stats.Dropped.Load()
	big := []node.Envelope{{Group: 2, Msg: &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
		Entries: []*pb.Entry{{Data: make([]byte, 8192)}}}}}
	tr.Send(2, big)
	if tr.Stats.Dropped.Load() != before+1 {
		t.Fatal("a batch over MaxFrameSize was queued")
	}
	if err := (Config{}).Validate(); err == nil {
		t.Fatal("an empty config validated")
	}
}

// TestBatchOverTheFrameBoundGoesAsSeveralFrames: a batch larger than
// MaxFrameSize, of messages each within it, arrives whole and in order.
func TestBatchOverTheFrameBoundGoesAsSeveralFrames(t *testing.T) {
	snd, rcv := pair(t, func(c *Config) { c.MaxFrameSize = 4096 })
	var batch []node.Envelope
	for i := range 10 {
		batch = append(batch, node.Envelope{Group: 2, Msg: &pb.Message{Type: pb.MessageType_MsgApp.Enum(), From: new(uint64(1)), To: new(uint64(2)),
			Index: new(uint64(i)), Entries: []*pb.Entry{{Data: make([]byte, 1500)}}}})
	}
	snd.Send(2, batch)
	var got []uint64
	for len(got) < len(batch) {
		select {
		case b := <-rcv.Inbox():
			for _, e := range b {
				got = append(got, e.Msg.GetIndex())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("received %v of 10 messages", got)
		}
	}
	for i, idx := range got {
		if idx != uint64(i) {
			t.Fatalf("messages arrived as %v", got)
		}
	}
	if n := rcv.Stats.ReceivedBatches.Load(); n < 4 || snd.Stats.Dropped.Load() != 0 {
		t.Fatalf("%d frames received, %d dropped", n, snd.Stats.Dropped.Load())
	}
}

// What the transport sends is counted by group and peer: messages, their
// encoded bytes, and snapshots among them.
func TestTrafficByGroupAndPeer(t *testing.T) {
	snd, rcv := pair(t, nil)
	hb := func(group uint64) node.Envelope {
		return node.Envelope{Group: group, Msg: &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1))}}
	}
	snd.Send(2, []node.Envelope{hb(2), hb(3), hb(2)})
	waitFor(t, "the batch received", func() bool { return rcv.Stats.ReceivedBatches.Load() > 0 })
	got := snd.Traffic()
	if len(got) != 2 || got[0].Group != 2 || got[0].Peer != 2 || got[0].Messages != 2 || got[1].Group != 3 || got[1].Messages != 1 {
		t.Fatalf("traffic %+v", got)
	}
	if got[0].Bytes == 0 || got[0].Bytes != 2*got[1].Bytes || got[0].Snapshots != 0 {
		t.Fatalf("bytes %+v", got)
	}
}
