package node

import (
	"encoding/binary"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Tick advances every group's logical clock by one tick.
func (n *MultiRaft) Tick() {
	if n.failed != nil {
		return
	}
	n.ticks++
	if n.unsynced && n.ticks%4 == 0 {
		// The broken ordering's deferred fsync, as a disk written behind
		// the loop would make it.
		if err := n.db.SyncWAL(); err != nil {
			n.fail(err)
			return
		}
		n.unsynced = false
	}
	for _, g := range n.groups {
		g.rn.Tick()
	}
}

// Deliver steps an inbound message into its group. Messages for unknown
// groups, and everything after a failure, are dropped. A MsgSnap comes
// with its body (Snapshot), which the node then owns and closes.
func (n *MultiRaft) Deliver(env Envelope) {
	g, ok := n.byID[env.Group]
	if n.failed != nil && ok && env.Msg != nil && fromLeader(env.Msg) && env.Msg.GetFrom() != n.cfg.ID {
		g.heard = env.Msg.GetFrom()
	}
	if n.failed != nil || !ok || env.Msg == nil {
		if env.Snapshot != nil {
			n.settle(env.Group, env.Snapshot, false)
		}
		return
	}
	if env.Snapshot != nil {
		n.deliverSnapshot(g, env)
		return
	}
	if env.Msg.GetType() == pb.MessageType_MsgSnap && !bodiless(env.Msg) {
		return // a snapshot whose body did not come with it cannot be installed
	}
	// Errors here are messages raft ignores (stale, from unknown peers).
	_ = g.rn.Step(env.Msg)
}

// fromLeader says m is sent only by a group's leader.
func fromLeader(m *pb.Message) bool {
	switch m.GetType() {
	case pb.MessageType_MsgApp, pb.MessageType_MsgHeartbeat, pb.MessageType_MsgSnap:
		return true
	}
	return false
}

// Process runs one iteration of the loop. It reports whether there was
// anything to do, so a driver can call it again until there is not.
func (n *MultiRaft) Process() bool {
	if n.failed != nil {
		return false
	}
	n.submit()
	n.expire()
	n.reportSnapshots()

	type ready struct {
		g  *group
		rd raft.Ready
	}
	var rds []ready
	for _, g := range n.groups {
		if g.rn.HasReady() {
			rds = append(rds, ready{g, g.rn.Ready()})
		}
	}
	compact := n.compactions()
	for i, c := range compact {
		for _, r := range rds {
			if r.g == c.g && !raft.IsEmptySnap(r.rd.Snapshot) {
				compact[i].snapshot = true
			}
		}
	}
	if len(rds) == 0 && len(compact) == 0 && !n.anyConfDirty() {
		n.finishReads()
		return false
	}

	// 1. Install snapshots into the state machine first: a crash after it
	// leaves the state machine ahead of the log, which replay tolerates;
	// the other order could lose the snapshot's entries.
	for _, r := range rds {
		if raft.IsEmptySnap(r.rd.Snapshot) {
			continue
		}
		if err := n.restoreSnapshot(r.g, r.rd.Snapshot); err != nil {
			n.fail(fmt.Errorf("restore snapshot of group %d: %w", r.g.id, err))
			return false
		}
	}

	// 2. Persist every group's entries, HardState and snapshot in one batch.
	// The configuration and compaction records of the last iteration go
	// first, so that a snapshot installed now (which saves its own
	// configuration) overrides them. What the state machine must have
	// durable before it applies this iteration's entries goes in it too.
	b := n.db.NewBatch()
	batches := make([][]Entry, len(rds))
	for i, r := range rds {
		floor := max(r.g.smApplied, r.rd.Snapshot.GetMetadata().GetIndex())
		batches[i] = entries(r.rd.CommittedEntries, floor)
		if p, ok := n.sm.(Preparer); ok && len(batches[i]) > 0 {
			if err := p.Prepare(r.g.id, batches[i], b); err != nil {
				b.Close()
				n.fail(fmt.Errorf("prepare group %d: %w", r.g.id, err))
				return false
			}
		}
	}
	for _, g := range n.groups {
		if g.confDirty {
			if err := b.SetConfState(g.store, g.applied, g.conf); err != nil {
				n.fail(err)
				return false
			}
		}
	}
	for _, c := range compact {
		if c.snapshot {
			continue // the snapshot replaces the log anyway
		}
		// The configuration is saved as of applied in the same batch, so a
		// restart never needs entries at or before the compaction point.
		if err := b.SetConfState(c.g.store, c.g.applied, c.g.conf); err != nil {
			n.fail(err)
			return false
		}
		if err := b.Compact(c.g.store, c.to); err != nil {
			n.fail(fmt.Errorf("compact group %d: %w", c.g.id, err))
			return false
		}
	}
	for _, r := range rds {
		var err error
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			err = b.ApplySnapshot(r.g.store, r.rd.Snapshot)
		}
		if err == nil {
			err = b.Append(r.g.store, r.rd.Entries)
		}
		if err == nil && r.rd.HardState != nil {
			err = b.SetHardState(r.g.store, r.rd.HardState)
		}
		if err != nil {
			b.Close()
			n.fail(fmt.Errorf("persist group %d: %w", r.g.id, err))
			return false
		}
	}
	var err error
	if n.faults.SendBeforePersist {
		err = b.CommitNoSync()
		n.unsynced = true
	} else {
		err = b.Commit()
	}
	if err != nil {
		n.fail(err)
		return false
	}
	for _, g := range n.groups {
		g.confDirty = false
	}

	// 3. Send, batched per peer, in group order; snapshots on their own.
	var peers []uint64
	out := map[uint64][]Envelope{}
	for _, r := range rds {
		for _, m := range r.rd.Messages {
			if m.GetType() == pb.MessageType_MsgSnap {
				n.sendSnapshot(r.g, m)
				continue
			}
			to := m.GetTo()
			if _, ok := out[to]; !ok {
				peers = append(peers, to)
			}
			out[to] = append(out[to], Envelope{Group: r.g.id, Msg: m})
		}
	}
	for _, to := range peers {
		n.tr.Send(to, out[to])
	}

	// 4. Apply, then 5. Advance.
	for i, r := range rds {
		g := r.g
		if r.rd.SoftState != nil {
			if lead := r.rd.SoftState.Lead; lead != g.leader {
				n.leaderChanged(g, lead)
			}
			g.leader, g.state = r.rd.SoftState.Lead, r.rd.SoftState.RaftState
		}
		if !raft.IsEmptySnap(r.rd.Snapshot) {
			md := r.rd.Snapshot.GetMetadata()
			g.applied, g.appliedTerm, g.smApplied = md.GetIndex(), md.GetTerm(), md.GetIndex()
			g.conf = proto.Clone(md.GetConfState()).(*pb.ConfState)
		}
		if err := n.apply(g, r.rd.CommittedEntries, batches[i]); err != nil {
			n.fail(err)
			return false
		}
		for _, rs := range r.rd.ReadStates {
			if len(rs.RequestCtx) != 8 {
				continue
			}
			if rd, ok := n.reads[binary.BigEndian.Uint64(rs.RequestCtx)]; ok {
				rd.index, rd.haveIndex = rs.Index, true
			}
		}
		g.rn.Advance(r.rd)
	}
	n.closeStaleInbound()
	n.finishReads()
	return true
}

// entries is what the state machine applies of a group's committed
// entries: those after floor (applied before a restart, or by a snapshot),
// each command without the proposer's header.
func entries(ents []*pb.Entry, floor uint64) []Entry {
	var batch []Entry
	for _, e := range ents {
		if e.GetIndex() <= floor {
			continue
		}
		if batch == nil {
			batch = make([]Entry, 0, len(ents))
		}
		ent := Entry{Index: e.GetIndex(), Kind: KindEmpty}
		if t := e.GetType(); t == pb.EntryType_EntryConfChange || t == pb.EntryType_EntryConfChangeV2 {
			ent.Kind = KindConf
		} else if d := e.GetData(); e.GetType() == pb.EntryType_EntryNormal && len(d) >= headerLen && d[0] == headerVersion {
			ent.Kind, ent.Data = KindCommand, d[headerLen:]
		}
		batch = append(batch, ent)
	}
	return batch
}

// apply applies a group's committed entries: their configuration changes
// to raft, and batch (entries of them) to the state machine.
func (n *MultiRaft) apply(g *group, ents []*pb.Entry, batch []Entry) error {
	if len(ents) == 0 {
		return nil
	}
	var mine []*proposal
	for _, e := range ents {
		switch e.GetType() {
		case pb.EntryType_EntryConfChange:
			var cc pb.ConfChange
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("group %d entry %d: conf change: %w", g.id, e.GetIndex(), err)
			}
			g.conf = g.rn.ApplyConfChange(&cc)
			g.confDirty = true
		case pb.EntryType_EntryConfChangeV2:
			var cc pb.ConfChangeV2
			if err := proto.Unmarshal(e.GetData(), &cc); err != nil {
				return fmt.Errorf("group %d entry %d: conf change: %w", g.id, e.GetIndex(), err)
			}
			g.conf = g.rn.ApplyConfChange(&cc)
			g.confDirty = true
			if id, ok := n.mine(cc.GetContext()); ok {
				if c := n.confs[id]; c != nil {
					delete(n.confs, id)
					c.done(ConfResult{Index: e.GetIndex(), Conf: proto.Clone(g.conf).(*pb.ConfState)})
				}
			}
		}
		if e.GetIndex() <= g.smApplied {
			continue // applied before a restart
		}
		var p *proposal
		if id, ok := n.mine(e.GetData()); ok && e.GetType() == pb.EntryType_EntryNormal {
			p = n.proposals[id]
		}
		mine = append(mine, p)
	}
	if len(mine) != len(batch) {
		return fmt.Errorf("apply group %d: %d entries to apply, %d prepared", g.id, len(mine), len(batch))
	}
	last := ents[len(ents)-1]
	if len(batch) > 0 {
		for i, p := range mine {
			batch[i].Waited = p != nil && n.proposals[p.id] == p
		}
		results, err := n.sm.Apply(g.id, batch)
		if err != nil {
			return fmt.Errorf("apply group %d: %w", g.id, err)
		}
		if len(results) != len(batch) {
			return fmt.Errorf("apply group %d: %d results for %d entries", g.id, len(results), len(batch))
		}
		g.smApplied = batch[len(batch)-1].Index
		for i, p := range mine {
			// A proposal raft carried twice may commit twice in one batch:
			// its first entry answers it, once.
			if p != nil && n.proposals[p.id] == p {
				delete(n.proposals, p.id)
				p.done(ProposeResult{Index: batch[i].Index, Result: results[i]})
			}
		}
	}
	g.applied, g.appliedTerm = last.GetIndex(), last.GetTerm()
	return nil
}

func (n *MultiRaft) anyConfDirty() bool {
	for _, g := range n.groups {
		if g.confDirty {
			return true
		}
	}
	return false
}
