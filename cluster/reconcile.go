package cluster

import (
	"context"
	"slices"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/replica"
)

// reconcileEvery is how often a node brings the groups it leads in line
// with the membership.
const reconcileEvery = 250 * time.Millisecond

// reconcile makes every member a voter of every group, the way raft wants
// it: the leader of each group adds a member it lacks as a learner, and
// promotes a learner once its log has caught up with the group's commit.
// One change per group at a time; the node refuses one that would lose
// quorum.
func (c *Node) reconcile(ctx context.Context) {
	pending := map[uint64]bool{}
	done := make(chan uint64, 64)
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case g := <-done:
			delete(pending, g)
			continue
		case <-t.C:
		}
		members := c.sm.Members()
		if len(members) == 0 {
			continue
		}
		_ = c.do(ctx, func(n *node.Node) {
			for _, st := range n.Status() {
				if pending[st.Group] {
					continue
				}
				cc := c.nextChange(n, st, members)
				if cc == nil {
					continue
				}
				pending[st.Group] = true
				g := st.Group
				n.ProposeConfChange(g, cc, func(r node.ConfResult) {
					if r.Err != nil {
						c.log.Debug("reconcile: change not made", "group", g, "err", r.Err)
					}
					done <- g
				})
			}
		})
	}
}

// nextChange is the one membership change a group this node leads needs
// next, or nil.
func (c *Node) nextChange(n *node.Node, st node.GroupStatus, members []replica.Member) *pb.ConfChangeV2 {
	commit, match, leading := n.Progress(st.Group)
	if !leading {
		return nil
	}
	for _, m := range members {
		if !slices.Contains(st.Voters, m.ID) && !slices.Contains(st.Learners, m.ID) {
			return change(pb.ConfChangeType_ConfChangeAddLearnerNode, m.ID)
		}
	}
	for _, l := range st.Learners {
		if match[l] >= commit {
			return change(pb.ConfChangeType_ConfChangeAddNode, l)
		}
	}
	return nil
}

func change(t pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &t, NodeId: &id}}}
}
