package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"

	"tally/api"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/rest"
)

// GroupStatus is one group as this node sees it.
type GroupStatus struct {
	Group    uint64   `json:"group"`
	Kind     string   `json:"kind"` // "meta" or "data"
	Leader   uint64   `json:"leader"`
	Term     uint64   `json:"term"`
	Commit   uint64   `json:"commit"`
	Applied  uint64   `json:"applied"`
	Role     string   `json:"role"` // this node's: leader, follower, candidate, pre-candidate
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners"`
	// Quorum: this node reaches a quorum of the group (node.GroupStatus).
	Quorum bool `json:"quorum"`
}

// Status is the node and the cluster as this node sees it.
type Status struct {
	SchemaVersion int              `json:"schema_version"`
	ClusterID     string           `json:"cluster_id"`
	NodeID        uint64           `json:"node_id"`
	Failed        string           `json:"failed,omitempty"` // why the node stopped serving
	Members       []replica.Member `json:"members"`
	Groups        []GroupStatus    `json:"groups"`
	// Tolerates is the failures every group survives, by node and by zone,
	// counted from its voters' placement.
	Tolerates Tolerance `json:"tolerates"`
	// Restored names the backup this cluster was restored from, on the
	// node that restored it.
	Restored *Restored `json:"restored,omitempty"`
	// Placements counts the directory's recorded placements, as this node
	// has applied them (tally cluster placements lists them).
	Placements int `json:"placements"`
	// Moves are the session moves in progress and the recent ones, as
	// this node has applied the meta group (tally cluster moves).
	Moves []replica.Move `json:"moves,omitempty"`
	// Placement is each group's placement, the cluster's tolerance, the
	// groups short of their goal and the driver's recent decisions.
	Placement PlacementStatus `json:"placement"`

	// Custody is the custody policy (replica.CustodyAll or
	// replica.CustodyMajority): the voters holding an artifact's bytes
	// before a check on it begins.
	Custody string `json:"custody"`
}

// Tolerance is how many nodes, and whole zones, can fail with every group
// keeping a quorum.
type Tolerance struct {
	Voters  int    `json:"voters"`
	Nodes   int    `json:"nodes"`
	Zones   int    `json:"zones"`
	ZoneSet int    `json:"zone_count"`
	Summary string `json:"summary"`
}

// Status reports the node, from its loop.
func (c *Node) Status(ctx context.Context) (Status, error) {
	var st []node.GroupStatus
	var failed error
	if err := c.do(ctx, func(n *node.MultiRaft) { st, failed = n.Status(), n.Failed() }); err != nil {
		return Status{}, err
	}
	out := Status{SchemaVersion: 1, ClusterID: c.id.ClusterID, NodeID: c.cfg.NodeID, Members: c.sm.Members(), Restored: c.id.Restored, Placements: c.sm.PlacementCount(), Moves: c.sm.Moves(), Custody: c.CustodyPolicy()}
	if failed != nil {
		out.Failed = failed.Error()
	}
	for _, g := range st {
		kind := "data"
		if g.Group == node.MetaGroup {
			kind = "meta"
		}
		out.Groups = append(out.Groups, GroupStatus{Group: g.Group, Kind: kind, Leader: g.Leader, Term: g.Term, Commit: g.Commit,
			Applied: g.Applied, Role: role(g.State), Voters: nonNil(g.Voters), Learners: nonNil(g.Learners), Quorum: g.Quorum})
	}
	out.Tolerates = tolerance(out.Groups, out.Members)
	out.Placement = c.placementStatus(st)
	return out, nil
}

func nonNil(v []uint64) []uint64 {
	if v == nil {
		return []uint64{}
	}
	return v
}

func role(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return "follower"
}

// tolerance is the weakest group's: a group of v voters keeps a quorum
// through (v-1)/2 lost nodes, and through the loss of the largest zones
// while the voters left are a majority. It never promises more than the
// weakest group allows.
func tolerance(groups []GroupStatus, members []replica.Member) Tolerance {
	zoneOf := map[uint64]string{}
	for _, m := range members {
		zoneOf[m.ID] = m.Zone
	}
	t := Tolerance{Voters: -1, Nodes: -1, Zones: -1}
	for _, g := range groups {
		v := len(g.Voters)
		nodes := (v - 1) / 2
		perZone := map[string]int{}
		for _, id := range g.Voters {
			perZone[zoneOf[id]]++
		}
		counts := make([]int, 0, len(perZone))
		for _, n := range perZone {
			counts = append(counts, n)
		}
		slices.Sort(counts)
		slices.Reverse(counts)
		zones, lost := 0, 0
		for _, n := range counts {
			if v-(lost+n) <= v/2 {
				break
			}
			lost += n
			zones++
		}
		if t.Voters < 0 || v < t.Voters {
			t.Voters, t.ZoneSet = v, len(perZone)
		}
		if t.Nodes < 0 || nodes < t.Nodes {
			t.Nodes = nodes
		}
		if t.Zones < 0 || zones < t.Zones {
			t.Zones = zones
		}
	}
	t.Voters, t.Nodes, t.Zones = max(t.Voters, 0), max(t.Nodes, 0), max(t.Zones, 0)
	t.Summary = fmt.Sprintf("%d voter%s on %d node%s in %d zone%s: tolerates %d node%s, %d zone%s",
		t.Voters, plural(t.Voters), t.Voters, plural(t.Voters), t.ZoneSet, plural(t.ZoneSet), t.Nodes, plural(t.Nodes), t.Zones, plural(t.Zones))
	return t
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// Status routes.
const (
	StatusPath = "/v1/cluster/status"
	// HealthPath answers 200 when this node serves and reaches a quorum in
	// every group, else 503 naming the groups it cannot.
	HealthPath = "/v1/cluster/health"
)

// The node's own operations (OpStatus, OpHealth, OpIdentity, OpJoin and
// the operator's signed requests) are mounted by the server's route table
// (server.NewCluster), behind the middleware of every route: each takes
// its document through decode and answers a document, marshalled as JSON,
// or a refusal (rest.Refusal, a rest.Refuser), which the server
// writes.

// OpStatus reports the node and the cluster as this node sees them.
func (c *Node) OpStatus(ctx context.Context, _ Decode) (any, error) { return c.statusNow(ctx) }

// statusNow is Status, a node whose loop does not answer refused as
// retryable.
func (c *Node) statusNow(ctx context.Context) (Status, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return Status{}, rest.NewRetryable(CodeUnavailable, err.Error())
	}
	return st, nil
}

// Codes of the health route's 503s.
const (
	CodeNodeFailed = "NodeFailed"
	CodeNoQuorum   = "NoQuorum"
)

// OpHealth answers whether this node serves and reaches a quorum in every
// group; a 503 names why not (NodeFailed) or the groups it cannot reach a
// quorum in (NoQuorum, with "groups").
func (c *Node) OpHealth(ctx context.Context, _ Decode) (any, error) {
	st, err := c.statusNow(ctx)
	if err != nil {
		return nil, err
	}
	var without []uint64
	for _, g := range st.Groups {
		if !g.Quorum {
			without = append(without, g.Group)
		}
	}
	switch {
	case st.Failed != "":
		return nil, rest.NewRetryable(CodeNodeFailed, st.Failed)
	case len(without) > 0:
		groups, _ := json.Marshal(without)
		return nil, rest.NewRetryable(CodeNoQuorum, fmt.Sprintf("no quorum reached from this node in group(s) %v", without), api.M("groups", groups))
	}
	return map[string]any{"node_id": st.NodeID, "groups": len(st.Groups), "quorum": true}, nil
}
