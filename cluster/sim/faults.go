package sim

// The faults a run injects, and their healing.

import (
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

// chaos injects one fault and schedules the next.
func (w *World) chaos(end int64) {
	if w.now >= end {
		return
	}
	pick := w.nodes[w.rng.IntN(len(w.nodes))]
	other := w.nodes[w.rng.IntN(len(w.nodes))]
	down := len(w.nodes) - len(w.upNodes())
	switch r := w.rng.IntN(100); {
	case r < 15: // isolate a node both ways
		w.stats.Partitions++
		w.mix(3, pick.id)
		for _, o := range w.nodes {
			w.blocked[[2]uint64{pick.id, o.id}] = true
			w.blocked[[2]uint64{o.id, pick.id}] = true
		}
	case r < 25: // cut one direction only
		if pick != other {
			w.stats.Partitions++
			w.mix(4, pick.id, other.id)
			w.blocked[[2]uint64{pick.id, other.id}] = true
		}
	case r < 45: // heal the network
		w.mix(5)
		clear(w.blocked)
	case r < 48: // power loss: every node crashes at once
		for _, sn := range w.nodes {
			w.crash(sn)
			sn := sn
			w.after(time.Duration(50+w.rng.IntN(300))*time.Millisecond, func() { w.restart(sn) })
		}
	case r < 60: // crash, restart later
		if down < (len(w.nodes)-1)/2 || w.rng.IntN(4) == 0 {
			w.crash(pick)
			w.after(time.Duration(100+w.rng.IntN(900))*time.Millisecond, func() { w.restart(pick) })
		}
	case r < 68: // the disk fails under the next commit
		if pick.up {
			w.stats.DiskFaults++
			w.mix(6, pick.id)
			if w.rng.IntN(2) == 0 {
				pick.ffs.FailSyncs(true)
			} else {
				pick.ffs.FailWrites(true)
			}
		}
	case r < 80: // move a group's leadership mid-stream
		g := w.groups[w.rng.IntN(len(w.groups))]
		for _, sn := range w.upNodes() {
			for _, gt := range sn.n.Leading() {
				if gt.Group == g && other.id != sn.id {
					w.stats.Transfers++
					w.mix(7, g, other.id)
					sn.n.TransferLeader(g, other.id)
				}
			}
		}
	case r < 86:
		w.lossPct, w.dupPct = w.rng.IntN(15), w.rng.IntN(8)
	case r < 92 && w.opt.Placement:
		w.markOrDrain(pick)
	case r < 92:
		w.changeMembership()
	default:
		w.checkPrefixes()
	}
	w.after(time.Duration(50+w.rng.IntN(250))*time.Millisecond, func() { w.chaos(end) })
}

// changeMembership moves one group one step: a node not in it joins as a
// learner, a learner is promoted, or (above the initial size) a voter other
// than the leader is removed, for good.
func (w *World) changeMembership() {
	g := w.groups[w.rng.IntN(len(w.groups))]
	for _, sn := range w.upNodes() {
		if !slices.ContainsFunc(sn.n.Leading(), func(gt node.GroupTerm) bool { return gt.Group == g }) {
			continue
		}
		st := sn.n.Status()[slices.Index(w.groups, g)]
		in := map[uint64]bool{}
		for _, id := range append(slices.Clone(st.Voters), st.Learners...) {
			in[id] = true
		}
		var cc *pb.ConfChangeSingle
		for _, o := range w.nodes {
			if !in[o.id] && !w.removed[[2]uint64{g, o.id}] {
				cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeAddLearnerNode.Enum(), NodeId: new(o.id)}
				break
			}
		}
		if cc == nil && len(st.Learners) > 0 {
			cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeAddNode.Enum(), NodeId: new(st.Learners[0])}
		}
		if cc == nil && len(st.Voters) > w.opt.Voters {
			v := st.Voters[w.rng.IntN(len(st.Voters))]
			if v != sn.id {
				cc = &pb.ConfChangeSingle{Type: pb.ConfChangeType_ConfChangeRemoveNode.Enum(), NodeId: new(v)}
			}
		}
		if cc == nil {
			return
		}
		w.mix(10, g, uint64(cc.GetType()), cc.GetNodeId())
		change := cc
		sn.n.ProposeConfChange(g, &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{cc}}, func(r node.ConfResult) {
			if r.Err != nil {
				return
			}
			w.stats.Membership++
			if change.GetType() == pb.ConfChangeType_ConfChangeRemoveNode {
				w.removed[[2]uint64{g, change.GetNodeId()}] = true
			}
		})
		return
	}
}

// heal ends the faults: the network is whole and every node up.
func (w *World) heal() {
	w.mix(8)
	clear(w.blocked)
	w.lossPct, w.dupPct = 0, 0
	for _, sn := range w.nodes {
		if !sn.up {
			w.restart(sn)
		}
	}
}
