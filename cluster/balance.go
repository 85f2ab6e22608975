package cluster

// The driver spreading sessions over the data groups. On the meta
// group's leader, every balanceEvery, it measures each data group's
// sessions (their logs' bytes, from a node holding the group, over the
// signed group-sessions route) and their write rate (the growth since its
// last measurement), and asks the pure rule (rebalance.Next, with
// rebalance.Default's named thresholds and their hysteresis) for one
// step: begin one session's move (the mover carries it, as an operator's
// move), or add a data group when every group is above
// rebalance.Default.GroupFull. It begins nothing while any move is in
// progress, so at most one session is fenced at a time, and only that
// session's writes wait on it (for its fence). A session a constraint
// binds stays where it is.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"tally/cluster/node"
	"tally/cluster/rebalance"
	"tally/cluster/replica"
)

// GroupSessionsPath lists a data group's largest sessions (signed,
// between nodes).
const GroupSessionsPath = "/v1/cluster/group-sessions"

// Named bounds of the spreading.
const (
	// balanceEvery is how often the meta leader measures the groups and
	// may begin one move.
	balanceEvery = 5 * time.Second
	// groupSessionsMax bounds the sessions a group lists (its largest):
	// the rest count in its bytes only.
	groupSessionsMax = 256
)

// GroupSessionsRequest asks a node for a data group's largest sessions.
type GroupSessionsRequest struct {
	Group uint64 `json:"group"`
	Signed
}

func (r *GroupSessionsRequest) envelope() (string, *Signed, []any) {
	return "group-sessions", &r.Signed, []any{r.Group}
}

// GroupSessions is a group's largest sessions and the bytes of the rest.
type GroupSessions struct {
	Group    uint64                `json:"group"`
	Sessions []replica.SessionSize `json:"sessions"`
	Rest     int64                 `json:"rest"`
}

// OpGroupSessions answers a group's largest sessions as this node holds
// them.
func (c *Node) OpGroupSessions(ctx context.Context, decode Decode) (any, error) {
	var req GroupSessionsRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	gs, err := c.localGroupSessions(req.Group)
	if err != nil {
		return nil, refusal(err)
	}
	return gs, nil
}

// localGroupSessions lists the group's sessions from this node's replica,
// which must hold the group as its recorded configuration says.
func (c *Node) localGroupSessions(group uint64) (GroupSessions, error) {
	rec, ok := c.sm.Policy().Groups[group]
	if !ok || !(slices.Contains(rec.Voters, c.cfg.NodeID) || slices.Contains(rec.Learners, c.cfg.NodeID)) {
		return GroupSessions{}, fmt.Errorf("%w: group %d, node %d", node.ErrNotMember, group, c.cfg.NodeID)
	}
	all, err := c.sm.GroupSessions(group)
	if err != nil {
		return GroupSessions{}, err
	}
	out := GroupSessions{Group: group, Sessions: all[:min(len(all), groupSessionsMax)]}
	for _, s := range all[len(out.Sessions):] {
		out.Rest += s.Bytes
	}
	return out, nil
}

// groupSessions lists a group's largest sessions, here or at a node that
// holds it.
func (c *Node) groupSessions(ctx context.Context, group uint64) (GroupSessions, error) {
	if gs, err := c.localGroupSessions(group); err == nil {
		return gs, nil
	}
	var last error = fmt.Errorf("no node of group %d is known", group)
	for _, id := range c.groupNodes(group) {
		var gs GroupSessions
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, GroupSessionsRequest{Group: group})
		if last = c.callNode(ctx, id, GroupSessionsPath, &req, &gs); last == nil {
			return gs, nil
		}
	}
	return GroupSessions{}, last
}

// balanceState is what the spreading keeps between passes on the meta
// leader: the rule's hysteresis, and each session's bytes when last
// measured (for its write rate).
type balanceState struct {
	balancing bool
	seen      map[string]sample
}

type sample struct {
	bytes int64
	at    time.Time
}

// balancer runs the spreading while this node leads the meta group.
func (c *Node) balancer(ctx context.Context) {
	if c.cfg.NoSpread {
		return
	}
	st := &balanceState{seen: map[string]sample{}}
	c.whileMetaLeader(ctx, balanceEvery, func() bool {
		pctx, cancel := context.WithTimeout(ctx, moveStepTimeout)
		if err := c.balanceOnce(pctx, st, rebalance.Default); err != nil && ctx.Err() == nil {
			c.log.Debug("spread: no step this pass", "err", err)
		}
		cancel()
		return false
	}, func() {
		st.balancing = false
		clear(st.seen)
	})
}

// balanceOnce measures the groups and takes the rule's step.
func (c *Node) balanceOnce(ctx context.Context, st *balanceState, th rebalance.Thresholds) error {
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return err
	}
	for _, mv := range c.sm.Moves() {
		if !mv.Ended() || (mv.Step == replica.MoveAborted && !mv.Unwound) {
			return fmt.Errorf("move %d of %s is in progress", mv.ID, mv.Name())
		}
	}
	pol := c.sm.Policy()
	for _, ag := range c.sm.AddedGroups() {
		if _, ok := pol.Groups[ag.Group]; !ok {
			return fmt.Errorf("group %d was added and has not recorded its configuration yet", ag.Group)
		}
	}
	bound, _ := c.sm.Constraints()
	pinned := func(name string) bool {
		tenant, _, _ := strings.Cut(name, "/")
		return slices.ContainsFunc(bound, func(b replica.Constrained) bool {
			return b.Entry.Tenant == tenant && (b.Entry.Session == "" || b.Entry.Tenant+"/"+b.Entry.Session == name)
		})
	}
	now := time.Now()
	var groups []rebalance.Group
	for g := node.MetaGroup + 1; g <= node.MetaGroup+uint64(c.sm.DataGroups()); g++ {
		gs, err := c.groupSessions(ctx, g)
		if err != nil {
			return fmt.Errorf("group %d's sessions: %w", g, err)
		}
		rg := rebalance.Group{ID: g, Rest: gs.Rest}
		for _, s := range gs.Sessions {
			rs := rebalance.Session{Name: s.Name, Bytes: s.Bytes, Pinned: pinned(s.Name)}
			if prev, ok := st.seen[s.Name]; ok && now.After(prev.at) && s.Bytes >= prev.bytes {
				rs.Rate = float64(s.Bytes-prev.bytes) / now.Sub(prev.at).Seconds()
			}
			st.seen[s.Name] = sample{bytes: s.Bytes, at: now}
			rg.Sessions = append(rg.Sessions, rs)
		}
		groups = append(groups, rg)
	}
	plan := rebalance.Next(groups, th, st.balancing)
	st.balancing = plan.Balancing
	switch {
	case plan.AddGroup:
		if err := replica.CheckGroupsCount(1, c.sm.DataGroups()); err != nil {
			return err
		}
		add := replica.GroupsAdd{First: node.MetaGroup + 1 + uint64(c.sm.DataGroups()), Voters: c.newGroupsVoters(1)}
		if _, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpGroupsAdd, GroupsAdd: &add, TS: time.Now().UnixNano()}); err != nil {
			return err
		}
		c.log.Info("spread: data group added", "group", add.First, "voters", add.Voters[0], "why", plan.Reason)
	case plan.Move != nil:
		tenant, session, _ := strings.Cut(plan.Move.Session, "/")
		mv, err := c.Move(ctx, tenant, session, plan.Move.To, false)
		if err != nil {
			return err
		}
		c.log.Info("spread: session moving", "move", mv.ID, "session", mv.Name(), "from", mv.From, "to", mv.To, "why", plan.Reason)
	}
	return nil
}
