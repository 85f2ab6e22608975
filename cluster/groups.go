package cluster

// Adding data groups (tally cluster groups add): the operator's signed
// request records, in the meta group, each new group with the voters it
// starts on (rebalance.Voters over the members' load: the replication
// factor's worth, fewest replicas first, spread over zones). Every node
// opens each recorded group (keepGroups): its voters start it as the
// bootstrap's voters start theirs, the others wait to be added like a
// joining node. Its leader then records its configuration, and the
// placement driver keeps it at the factor like any other group. The
// bootstrap's groups stay the ones a session's name hashes to, so adding
// one reroutes no session: sessions reach it by a placement, a move, or
// the driver spreading them (balance.go).

import (
	"context"
	"slices"
	"time"

	"tally/cluster/node"
	"tally/cluster/rebalance"
	"tally/cluster/replica"
	"tally/internal/tick"
)

// GroupsAddPath adds data groups (signed).
const GroupsAddPath = "/v1/cluster/groups-add"

// keepGroupsEvery is how often a node looks for groups the meta group
// added that it has not opened yet.
const keepGroupsEvery = 100 * time.Millisecond

// GroupsAddRequest adds Count data groups.
type GroupsAddRequest struct {
	Count int `json:"count"`
	Signed
}

func (r *GroupsAddRequest) envelope() (string, *Signed, []any) {
	return "groups-add", &r.Signed, []any{r.Count}
}

// GroupsAdded answers a groups add: the groups added, with their voters.
type GroupsAdded struct {
	Groups []replica.AddedGroup `json:"groups"`
}

// OpGroupsAdd records Count new data groups, each with the voters the
// members' load gives it. A count out of bounds is refused (400, naming
// count) with nothing recorded, its nonce included.
func (c *Node) OpGroupsAdd(ctx context.Context, decode Decode) (any, error) {
	var req GroupsAddRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if err := replica.CheckGroupsCount(req.Count, c.sm.DataGroups()); err != nil {
		return nil, refusal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, refusal(err)
	}
	add := replica.GroupsAdd{First: node.MetaGroup + 1 + uint64(c.sm.DataGroups()), Voters: c.newGroupsVoters(req.Count)}
	out, err := c.signedMeta(ctx, &req.Signed, replica.MetaCommand{Op: replica.OpGroupsAdd, GroupsAdd: &add, TS: time.Now().UnixNano()})
	if err != nil {
		return nil, refusal(err)
	}
	added, _ := out.Value.([]replica.AddedGroup)
	for _, g := range added {
		c.log.Info("data group added", "group", g.Group, "voters", g.Voters)
	}
	return GroupsAdded{Groups: added}, nil
}

// newGroupsVoters picks count new groups' voters in turn, each group's
// voters counted in the members' load before the next is picked.
func (c *Node) newGroupsVoters(count int) [][]uint64 {
	pol := c.sm.Policy()
	nodes := placementNodes(c.sm.Members(), pol, c.sm.Liveness)
	out := make([][]uint64, 0, count)
	for range count {
		vs := rebalance.Voters(nodes, pol.Replicas)
		for i := range nodes {
			if slices.Contains(vs, nodes[i].ID) {
				nodes[i].Replicas++
			}
		}
		out = append(out, vs)
	}
	return out
}

// keepGroups opens, on this node, each group the meta group added, as
// this node applies it: with its recorded voters when it is one of them.
func (c *Node) keepGroups(ctx context.Context) {
	open := map[uint64]bool{}
	tick.Every(ctx, keepGroupsEvery, func() {
		for _, g := range c.sm.AddedGroups() {
			if open[g.Group] {
				continue
			}
			voters := g.Voters
			if !slices.Contains(voters, c.cfg.NodeID) {
				voters = nil // a joiner's wait: the group's leader adds it
			}
			var err error
			if derr := c.do(ctx, func(n *node.MultiRaft) {
				err = n.AddGroup(g.Group, func(uint64) []uint64 { return voters })
			}); derr != nil {
				break // stopping, or the loop busy: the next tick
			}
			if err != nil {
				c.log.Error("open an added group", "group", g.Group, "err", err)
				break
			}
			open[g.Group] = true
		}
	})
}
