package sim

// The simulated network: messages and snapshot streams between nodes,
// lost, delayed, duplicated or cut as the faults have it.

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/node"
)

type transport struct {
	w    *World
	from uint64
}

func (t *transport) Send(to uint64, batch []node.Envelope) {
	w := t.w
	if !t.reaches(to) {
		return
	}
	// Copy, as a wire would: the receiver must not share the sender's
	// messages.
	cp := make([]node.Envelope, len(batch))
	for i, e := range batch {
		cp[i] = node.Envelope{Group: e.Group, Msg: proto.Clone(e.Msg).(*pb.Message)}
	}
	w.stats.Messages += len(cp)
	if w.now < int64(w.opt.Chaos) && w.rng.IntN(1000) < 2 {
		// Crash at the worst moment: right after sending, before anything
		// else happens at the sender. Whatever the messages promised must
		// already be on its disk.
		sender := w.nodes[t.from-1]
		epoch := sender.epoch
		w.after(0, func() {
			if sender.epoch == epoch {
				w.crash(sender)
				w.after(time.Duration(100+w.rng.IntN(400))*time.Millisecond, func() { w.restart(sender) })
			}
		})
	}
	copies := 1
	if w.rng.IntN(100) < w.dupPct {
		copies = 2
	}
	sn := w.nodes[to-1]
	for range copies {
		delay := time.Duration(1+w.rng.IntN(15)) * time.Millisecond
		epoch := sn.epoch
		w.after(delay, func() {
			if !sn.up || sn.epoch != epoch || w.blocked[[2]uint64{t.from, to}] {
				return
			}
			for _, e := range cp {
				sn.n.Deliver(e)
			}
			w.process(sn)
		})
	}
}

// SendSnapshot carries a snapshot's body whole, in memory (a test may),
// on the same lossy, partitionable network. The body is written from the
// manifest when the stream arrives, as a real stream writes it while the
// sender's loop goes on, so the state machine must still produce what its
// manifest named. The stream can be lost on the way there or its
// acknowledgment on the way back, and either failure is told to the
// sender from its own loop, as a real stream's would be; a sender that
// crashed meanwhile took its stream with it.
func (t *transport) SendSnapshot(to uint64, s node.OutboundSnapshot) {
	w := t.w
	w.stats.Snapshots++
	if s.Envelope.Group == node.MetaGroup {
		w.stats.MetaSnapshots++
	}
	if !t.reaches(to) {
		t.report(s, errors.New("snapshot lost on the way"))
		return
	}
	env := node.Envelope{Group: s.Envelope.Group, Msg: proto.Clone(s.Envelope.Msg).(*pb.Message)}
	sender, sn := w.nodes[t.from-1], w.nodes[to-1]
	senderEpoch, epoch := sender.epoch, sn.epoch
	// A body takes longer than a message: a millisecond per 64 KiB more.
	delay := time.Duration(1+w.rng.IntN(15)+int(s.Size>>16)) * time.Millisecond
	w.after(delay, func() {
		if !sender.up || sender.epoch != senderEpoch {
			return
		}
		if !sn.up || sn.epoch != epoch || w.blocked[[2]uint64{t.from, to}] {
			t.report(s, errors.New("snapshot stream cut"))
			return
		}
		var body bytes.Buffer
		err := s.Write(&body)
		if errors.Is(err, fs.ErrNotExist) {
			// A staged upload used since the manifest was taken, its file
			// removed: the stream fails, and raft sends a newer snapshot
			// (replica/snapshot_bytes.go).
			w.stats.SnapshotsStale++
			t.report(s, err)
			return
		}
		if err != nil || uint64(body.Len()) != s.Size {
			w.fail("snapshot of group %d from node %d: %d bytes written, %d in the manifest: %v", env.Group, t.from, body.Len(), s.Size, err)
			return
		}
		env.Snapshot = &node.InboundSnapshot{
			Body: io.NopCloser(&body),
			Stepped: func(bool) {
				back := transport{w: w, from: to}
				if back.reaches(t.from) {
					t.report(s, nil)
				} else {
					t.report(s, errors.New("snapshot acknowledgment lost"))
				}
			},
		}
		sn.n.Deliver(env)
		w.process(sn)
	})
}

// reaches rolls whether a message from t's node to another gets through
// the network as it is now.
func (t *transport) reaches(to uint64) bool {
	w := t.w
	if w.blocked[[2]uint64{t.from, to}] || int(to) > len(w.nodes) || to == 0 {
		return false
	}
	return w.rng.IntN(100) >= w.lossPct
}

// report tells the sender a stream's outcome, from its loop, after a
// network delay; a sender restarted since is a new node that never sent it.
func (t *transport) report(s node.OutboundSnapshot, err error) {
	w := t.w
	sender := w.nodes[t.from-1]
	epoch := sender.epoch
	w.mix(11, t.from, s.Envelope.Group)
	if err != nil {
		w.stats.SnapshotsFailed++
	}
	w.after(time.Duration(1+w.rng.IntN(15))*time.Millisecond, func() {
		if sender.up && sender.epoch == epoch {
			s.Done(err)
			w.process(sender)
		}
	})
}
