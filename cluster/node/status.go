package node

import (
	"slices"

	"go.etcd.io/raft/v3"
)

// GroupStatus is one group's state at this node.
type GroupStatus struct {
	Group    uint64
	Leader   uint64
	Term     uint64
	Commit   uint64
	Applied  uint64
	State    raft.StateType
	Voters   []uint64
	Learners []uint64
	// Quorum says this node reaches a quorum of the group: as its leader,
	// a majority of the voters (itself included) heard from within the
	// last election timeout; otherwise, it follows a leader (which, with
	// CheckQuorum, steps down once it loses its quorum).
	Quorum bool
	// Leaving are the voters of the configuration a joint change is
	// leaving (raft leaves it by itself once the change applied); empty
	// outside one. No other change of the group can be made meanwhile.
	Leaving []uint64
}

// Status reports every group, in group order.
func (n *MultiRaft) Status() []GroupStatus {
	out := make([]GroupStatus, 0, len(n.groups))
	for _, g := range n.groups {
		bs := g.rn.BasicStatus()
		st := GroupStatus{
			Group: g.id, Leader: bs.Lead, Term: bs.HardState.GetTerm(), Commit: bs.HardState.GetCommit(),
			Applied: g.applied, State: bs.RaftState, Voters: slices.Clone(g.conf.GetVoters()),
			Learners: slices.Clone(g.conf.GetLearners()), Leaving: slices.Clone(g.conf.GetVotersOutgoing()),
		}
		switch {
		case n.failed != nil:
			// Stopped, it leads nothing and follows nobody: it names the
			// leader others last showed it, never itself.
			st.Leader, st.State = g.heard, raft.StateFollower
		case bs.RaftState == raft.StateLeader:
			active := 0
			for id, pr := range g.rn.Status().Progress {
				if slices.Contains(st.Voters, id) && (id == n.cfg.ID || pr.RecentActive) {
					active++
				}
			}
			st.Quorum = active > len(st.Voters)/2
		default:
			st.Quorum = bs.Lead != 0
		}
		out = append(out, st)
	}
	return out
}

// Progress reports, for a group this node leads, the group's commit index
// and how far each member's log matches the leader's (learners included);
// ok is false if this node does not lead the group.
func (n *MultiRaft) Progress(gid uint64) (commit uint64, match map[uint64]uint64, ok bool) {
	g, found := n.byID[gid]
	if !found || n.failed != nil {
		return 0, nil, false
	}
	st := g.rn.Status()
	if st.RaftState != raft.StateLeader {
		return 0, nil, false
	}
	match = make(map[uint64]uint64, len(st.Progress))
	for id, pr := range st.Progress {
		match[id] = pr.Match
	}
	return st.HardState.GetCommit(), match, true
}

// GroupTerm names a group and a term.
type GroupTerm struct{ Group, Term uint64 }

// Leading lists the groups this node leads, with the term of each.
func (n *MultiRaft) Leading() []GroupTerm {
	if n.failed != nil {
		return nil
	}
	var out []GroupTerm
	for _, g := range n.groups {
		if g.state == raft.StateLeader {
			out = append(out, GroupTerm{Group: g.id, Term: g.rn.BasicStatus().HardState.GetTerm()})
		}
	}
	return out
}

// Pending counts proposals, reads and membership changes waiting here.
func (n *MultiRaft) Pending() int { return len(n.proposals) + len(n.reads) + len(n.confs) }
