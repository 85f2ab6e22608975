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
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// TestThreeNodesReplicateOverTCP runs three real nodes, each with its own
// loop goroutine, store and listener on 127.0.0.1, and requires every
// acknowledged append on every node with identical chains.
func TestThreeNodesReplicateOverTCP(t *testing.T) {
	const secret = "a join secret of some length"
	ids := []uint64{1, 2, 3}
	trs := map[uint64]*TCP{}
	for _, id := range ids {
		tr, err := Listen(cfgFor(id, "c1", secret), nil)
		if err != nil {
			t.Fatal(err)
		}
		trs[id] = tr
	}
	for _, a := range ids {
		for _, b := range ids {
			trs[a].AddPeer(b, trs[b].Addr())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	calls := map[uint64]chan func(*node.Node){}
	sms := map[uint64]*model.SM{}
	for _, id := range ids {
		db, err := raftlog.Open("/d", raftlog.Options{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := node.DefaultConfig(id)
		cfg.Groups = []uint64{node.MetaGroup, 2}
		cfg.TickInterval = 10 * time.Millisecond
		sm := model.New(db)
		n, err := node.New(cfg, db, sm, trs[id], realClock{}, func(uint64) []uint64 { return ids }, nil)
		if err != nil {
			t.Fatal(err)
		}
		sms[id] = sm
		ch := make(chan func(*node.Node))
		calls[id] = ch
		inbox := trs[id].Inbox()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.Run(ctx, inbox, ch)
			db.Close()
		}()
	}
	defer func() {
		cancel()
		wg.Wait()
		for _, tr := range trs {
			tr.Close()
		}
	}()
	// Appends through every node; a node forwards to the leader.
	const total = 60
	for i := 1; i <= total; i++ {
		via := ids[i%3]
		for attempt := 0; ; attempt++ {
			done := make(chan node.ProposeResult, 1)
			cmd, _ := json.Marshal(model.Command{Session: "s", Client: uint64(via), Req: uint64(i), Value: fmt.Sprint("v", i)})
			calls[via] <- func(n *node.Node) { n.Propose(2, cmd, func(r node.ProposeResult) { done <- r }) }
			r := <-done
			if r.Err == nil {
				break
			}
			if attempt > 50 {
				t.Fatalf("append %d via %d: %v", i, via, r.Err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	logOf := func(id uint64) []model.Record {
		ch := make(chan []model.Record, 1)
		calls[id] <- func(*node.Node) {
			recs, _ := sms[id].Log(2, "s")
			ch <- recs
		}
		return <-ch
	}
	waitFor(t, "every node to apply every append", func() bool {
		for _, id := range ids {
			if len(logOf(id)) != total {
				return false
			}
		}
		return true
	})
	ref := logOf(1)
	for _, id := range ids[1:] {
		got := logOf(id)
		if string(got[total-1].Hash) != string(ref[total-1].Hash) {
			t.Fatalf("node %d's chain differs from node 1's", id)
		}
	}
	for _, id := range ids {
		if trs[id].Stats.SentBatches.Load() == 0 || trs[id].Stats.ReceivedBatches.Load() == 0 {
			t.Fatalf("node %d sent or received nothing", id)
		}
	}
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
			select {
			case b := <-srv.Inbox():
				t.Fatalf("refused peer's batch delivered: %v", b)
			case <-time.After(50 * time.Millisecond):
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
