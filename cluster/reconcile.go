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

// rebalanceCooldown is the pause after a leadership transfer before this
// node considers another, so the leader counts it sees have caught up.
const rebalanceCooldown = time.Second

// reconcile brings the groups this node leads in line with the
// membership. With a replication factor recorded (every cluster made by
// this release), the placement driver decides (drive, driver.go). A
// cluster made before the factor existed, until configured, keeps the
// rule it had: every member a voter of every group. The leader of each group adds a member it lacks as a learner,
// promotes a learner once its log has caught up with the group's commit,
// and removes a node no longer a member. One change per group at a time;
// the node refuses one that would lose quorum. It also spreads leadership:
// a node leading more groups than another caught-up voter plus one hands
// one of them over.
func (c *Node) reconcile(ctx context.Context) {
	pending := map[uint64]bool{}
	ds := newDriverState()
	done := make(chan uint64, 64)
	t := time.NewTicker(reconcileEvery)
	defer t.Stop()
	var lastTransfer time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case g := <-done:
			// A step ended: the next may be ready now (its record
			// applied here), so the pass runs at once rather than a
			// tick later.
			delete(pending, g)
		case <-t.C:
		}
		members := c.sm.Members()
		if len(members) == 0 {
			continue
		}
		pol := c.sm.Policy()
		_ = c.do(ctx, func(n *node.MultiRaft) {
			sts := n.Status()
			if time.Since(lastTransfer) > rebalanceCooldown && c.rebalance(n, sts, members, pol, pending) {
				lastTransfer = time.Now()
			}
			if pol.Replicas > 0 {
				// The cluster has a replication factor: the placement
				// driver places every group (driver.go).
				c.drive(ctx, n, sts, members, pol, ds, pending, done)
				return
			}
			for _, st := range sts {
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
func (c *Node) nextChange(n *node.MultiRaft, st node.GroupStatus, members []replica.Member) *pb.ConfChangeV2 {
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
	isMember := func(id uint64) bool {
		return slices.ContainsFunc(members, func(m replica.Member) bool { return m.ID == id })
	}
	me := c.cfg.NodeID
	for _, id := range append(slices.Clone(st.Learners), st.Voters...) {
		if id != me && !isMember(id) {
			return change(pb.ConfChangeType_ConfChangeRemoveNode, id)
		}
	}
	if !isMember(me) {
		// A leader never removes itself (the membership may not have its
		// own record yet, just after a bootstrap): it hands the group to a
		// caught-up member, which removes it.
		for _, v := range st.Voters {
			if v != me && isMember(v) && match[v] >= commit {
				n.TransferLeader(st.Group, v)
				break
			}
		}
	}
	return nil
}

// rebalance hands one group this node leads to the caught-up voter leading
// the fewest, if this node leads more than that voter plus one. It reports
// whether it asked for a transfer.
func (c *Node) rebalance(n *node.MultiRaft, sts []node.GroupStatus, members []replica.Member, pol replica.Policy, pending map[uint64]bool) bool {
	if pol.Replicas > 0 {
		return c.spreadLeaders(n, sts, members, pol, pending)
	}
	me := c.cfg.NodeID
	leads := map[uint64]int{}
	for _, m := range members {
		leads[m.ID] = 0
	}
	for _, st := range sts {
		if st.Leader != 0 {
			leads[st.Leader]++
		}
	}
	for _, st := range sts {
		if st.Leader != me || pending[st.Group] || len(st.Learners) > 0 {
			continue
		}
		commit, match, ok := n.Progress(st.Group)
		if !ok {
			continue
		}
		var to uint64
		for _, v := range st.Voters {
			if _, member := leads[v]; !member || v == me || match[v] < commit || leads[v]+1 >= leads[me] {
				continue
			}
			if to == 0 || leads[v] < leads[to] {
				to = v
			}
		}
		if to != 0 {
			c.log.Info("rebalance: handing over leadership", "group", st.Group, "to", to, "leads", leads[me], "theirs", leads[to])
			n.TransferLeader(st.Group, to)
			return true
		}
	}
	return false
}

func change(t pb.ConfChangeType, id uint64) *pb.ConfChangeV2 {
	return &pb.ConfChangeV2{Changes: []*pb.ConfChangeSingle{{Type: &t, NodeId: &id}}}
}
