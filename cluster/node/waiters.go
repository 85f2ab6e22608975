package node

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"
)

type proposal struct {
	id       uint64
	group    uint64
	data     []byte
	deadline time.Time
	done     func(ProposeResult)
	handed   bool   // raft took it
	lead     uint64 // the leader raft knew of when it took it
}

type confProposal struct {
	id       uint64
	group    uint64
	deadline time.Time
	done     func(ConfResult)
}

type read struct {
	id        uint64
	group     uint64
	deadline  time.Time
	done      func(ReadResult)
	index     uint64
	haveIndex bool
}

// submit hands queued proposals and reads to raft; those raft drops (no
// leader known yet) stay queued until their deadline.
func (n *MultiRaft) submit() {
	keep := n.queue[:0]
	for _, p := range n.queue {
		if _, live := n.proposals[p.id]; !live {
			continue
		}
		g := n.byID[p.group]
		if err := g.rn.Propose(p.data); err != nil {
			keep = append(keep, p)
			continue
		}
		// Raft's own leader: it may know one the loop hears of only in the
		// next Ready.
		p.handed, p.lead = true, g.rn.BasicStatus().Lead
	}
	clear(n.queue[len(keep):])
	n.queue = keep
	for _, r := range n.readQueue {
		if _, live := n.reads[r.id]; !live {
			continue
		}
		g := n.byID[r.group]
		if g.leader == 0 {
			// Raft drops a read it cannot forward, without a word.
			delete(n.reads, r.id)
			r.done(ReadResult{Err: fmt.Errorf("%w: group %d", ErrNoLeader, r.group)})
			continue
		}
		g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, r.id))
	}
	n.readQueue = nil
}

// leaderChanged fails the proposals of g handed to another leader than
// lead: the old leader may have dropped them, and waiting out their
// deadline would hold their clients through the whole failover.
func (n *MultiRaft) leaderChanged(g *group, lead uint64) {
	for _, id := range sortedKeys(n.proposals) {
		p := n.proposals[id]
		if p.group == g.id && p.handed && p.lead != lead {
			delete(n.proposals, id)
			p.done(ProposeResult{Err: ErrLeaderChanged, Proposed: true})
		}
	}
}

func (n *MultiRaft) expire() {
	now := n.clock.Now()
	if n.nextExpiry.IsZero() || now.Before(n.nextExpiry) {
		return // nothing waiting is due: the loop runs often, deadlines pass rarely
	}
	for _, id := range sortedKeys(n.proposals) {
		if p := n.proposals[id]; !now.Before(p.deadline) {
			delete(n.proposals, id)
			p.done(ProposeResult{Err: ErrTimeout, Proposed: p.handed})
		}
	}
	for _, id := range sortedKeys(n.reads) {
		if r := n.reads[id]; !now.Before(r.deadline) {
			delete(n.reads, id)
			r.done(ReadResult{Err: ErrTimeout})
		}
	}
	for _, id := range sortedKeys(n.confs) {
		if c := n.confs[id]; !now.Before(c.deadline) {
			// Raft turns a change it refuses (another one pending that this
			// node did not know of) into an empty entry: it ends here.
			delete(n.confs, id)
			c.done(ConfResult{Err: ErrTimeout})
		}
	}
	n.nextExpiry = time.Time{}
	for _, p := range n.proposals {
		n.expiresAt(p.deadline)
	}
	for _, r := range n.reads {
		n.expiresAt(r.deadline)
	}
	for _, c := range n.confs {
		n.expiresAt(c.deadline)
	}
}

// expiresAt notes a deadline of something waiting, keeping the earliest.
func (n *MultiRaft) expiresAt(d time.Time) {
	if n.nextExpiry.IsZero() || d.Before(n.nextExpiry) {
		n.nextExpiry = d
	}
}

func (n *MultiRaft) finishReads() {
	if !n.anyReadDone() {
		return
	}
	for _, id := range sortedKeys(n.reads) {
		r := n.reads[id]
		if r.haveIndex && n.byID[r.group].applied >= r.index {
			delete(n.reads, id)
			r.done(ReadResult{Index: r.index})
		}
	}
}

// anyReadDone reports whether a read's index is applied, without the
// sorting finishReads does to answer them in order.
func (n *MultiRaft) anyReadDone() bool {
	for _, r := range n.reads {
		if r.haveIndex && n.byID[r.group].applied >= r.index {
			return true
		}
	}
	return false
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
