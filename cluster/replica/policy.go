package replica

import (
	"fmt"
	"maps"
	"slices"

	"tally/cluster/placement"
	"tally/refuse"
)

// Policy is the placement the meta group records: what the placement
// driver places by. Stored in the meta group and its snapshot: do not
// rename the members.
type Policy struct {
	// Replicas is the replication factor: each data group's voters. 0 is
	// a cluster made before it existed, where every member is a voter of
	// every group, until an operator configures one (tally cluster
	// configure --replicas N).
	Replicas int `json:"replicas,omitempty"`
	// Draining are the nodes an operator asked every replica off.
	Draining []uint64 `json:"draining,omitempty"`
	// Groups are the groups' configurations as their leaders last
	// recorded them (placement.group), by group: every node learns from
	// them where a group it does not hold lives, and each node's load.
	Groups map[uint64]GroupConf `json:"groups,omitempty"`
	// Decisions are the placement driver's latest decisions, oldest
	// first, at most DecisionsMax; at most one per group is in flight.
	Decisions []Decision `json:"decisions,omitempty"`
	// NextDecision numbers the next decision.
	NextDecision uint64 `json:"next_decision,omitempty"`
	// Constraints are the tenants' and sessions' constraints, by name
	// (constraint.go).
	Constraints []ConstraintEntry `json:"constraints,omitempty"`

	// Custody is the required copies of an artifact's bytes before an
	// evaluation of it begins (custody.go): CustodyAll (also when empty)
	// or CustodyMajority.
	Custody string `json:"custody,omitempty"`
}

// GroupConf is a group's configuration as its leader recorded it.
type GroupConf struct {
	Voters   []uint64 `json:"voters"`
	Learners []uint64 `json:"learners,omitempty"`
	// Epoch is the group's placement epoch: the raft index of the last
	// configuration change applied in it (0 before any).
	Epoch uint64 `json:"epoch"`
	// Leader recorded it.
	Leader uint64 `json:"leader"`
	// Bytes is the group's size on its leader's disk when it recorded
	// the configuration: the load a replica of it adds to a node.
	Bytes int64 `json:"bytes,omitempty"`
	// CaughtUp are the learners whose log matched the group's commit at
	// the leader when it recorded the configuration: the ones the
	// placement driver may promote.
	CaughtUp []uint64 `json:"caught_up,omitempty"`
}

// Decision is one change the placement driver committed before making
// it. Stored: do not rename the members.
type Decision struct {
	ID    uint64       `json:"id"`
	Group uint64       `json:"group"`
	Op    placement.Op `json:"op"`
	Node  uint64       `json:"node"`
	// Replaces is the voter a placement.Replace removes in the same joint
	// change that promotes Node.
	Replaces uint64 `json:"replaces,omitempty"`
	Reason   string `json:"reason"`
	// Epoch is the group's placement epoch the decision was made at.
	Epoch uint64 `json:"epoch"`
	// By is the node that made it (the meta group's leader then; the
	// group's leader before the driver moved there), Term its term.
	By   uint64 `json:"by"`
	Term uint64 `json:"term,omitempty"`
	// State is DecisionInFlight until ended: DecisionDone, DecisionFailed
	// or DecisionAbandoned (its maker no longer leads, and its change was
	// not found made).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	Made  int64  `json:"made"`            // Unix nanoseconds, the maker's clock
	Ended int64  `json:"ended,omitempty"` // Unix nanoseconds
}

// Decision states. Stored: do not rename.
const (
	DecisionInFlight  = "in-flight"
	DecisionDone      = "done"
	DecisionFailed    = "failed"
	DecisionAbandoned = "abandoned"
)

// DecisionsMax bounds the decisions kept: the oldest ended ones go first.
const DecisionsMax = 256

// Placement driver operations.
const (
	// OpDecide records a decision in flight, refused while the group has
	// one.
	OpDecide = "placement.decide"
	// OpDecided ends a decision in flight (MetaCommand.Decision's ID,
	// State and Error).
	OpDecided = "placement.decided"
	// OpGroupConf records a group's configuration (MetaCommand.Group,
	// MetaCommand.GroupConf), unless one of a later epoch is recorded.
	OpGroupConf = "placement.group"
)

// OpDrain marks a node draining (MetaCommand.ID): the driver moves
// every replica off it.
const OpDrain = "placement.drain"

// decideDrain marks a member draining; a drain asked again answers as the
// first.
func decideDrain(p Policy, members []Member, c MetaCommand) (Policy, Outcome) {
	if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == c.ID }) {
		return p, Outcome{Err: refuse.NotFoundf("node", fmt.Sprintf("node %d is not a member", c.ID))}
	}
	if slices.Contains(p.Draining, c.ID) {
		return p, Outcome{}
	}
	p = p.clone()
	p.Draining = append(p.Draining, c.ID)
	slices.Sort(p.Draining)
	return p, Outcome{}
}

// CodeDecisionInFlight refuses a decision for a group that has one.
const CodeDecisionInFlight refuse.Code = "DecisionInFlight"

// decidePolicy applies the placement driver's operations.
func decidePolicy(p Policy, c MetaCommand) (Policy, Outcome) {
	switch c.Op {
	case OpConfigure:
		return decideConfigure(p, c)
	case OpDecide:
		d := c.Decision
		if d == nil || d.Group == 0 || d.Node == 0 {
			return p, Outcome{Err: refuse.Invalidf("decision", "required, with a group and a node")}
		}
		if (d.Op == placement.Replace) != (d.Replaces != 0) || d.Replaces == d.Node && d.Replaces != 0 {
			return p, Outcome{Err: refuse.Invalidf("decision.replaces", "a replace names the voter it removes, another node than the one it promotes; no other change names one")}
		}
		if i := p.inFlight(d.Group); i >= 0 {
			return p, Outcome{Err: refuse.New(CodeDecisionInFlight, "group", fmt.Sprintf("group %d has decision %d in flight", d.Group, p.Decisions[i].ID))}
		}
		p = p.clone()
		p.NextDecision++
		nd := *d
		nd.ID, nd.State, nd.Error, nd.Ended = p.NextDecision, DecisionInFlight, "", 0
		nd.Made = c.TS
		p.Decisions = append(p.Decisions, nd)
		if over := len(p.Decisions) - DecisionsMax; over > 0 {
			p.Decisions = dropEnded(p.Decisions, over)
		}
		return p, Outcome{Value: nd}
	case OpDecided:
		d := c.Decision
		if d == nil {
			return p, Outcome{Err: refuse.Invalidf("decision", "required")}
		}
		i := slices.IndexFunc(p.Decisions, func(x Decision) bool { return x.ID == d.ID })
		if i < 0 {
			return p, Outcome{Err: refuse.NotFoundf("decision", fmt.Sprintf("no decision %d", d.ID))}
		}
		if p.Decisions[i].State != DecisionInFlight {
			return p, Outcome{Value: p.Decisions[i]} // ended already: a retry
		}
		switch d.State {
		case DecisionDone, DecisionFailed, DecisionAbandoned:
		default:
			return p, Outcome{Err: refuse.Invalidf("decision.state", fmt.Sprintf("%q is not an end (done, failed, abandoned)", d.State))}
		}
		p = p.clone()
		p.Decisions[i].State, p.Decisions[i].Error, p.Decisions[i].Ended = d.State, d.Error, c.TS
		return p, Outcome{Value: p.Decisions[i]}
	case OpGroupConf:
		if c.GroupConf == nil || c.Group == 0 {
			return p, Outcome{Err: refuse.Invalidf("group_conf", "required, with a group")}
		}
		if old, ok := p.Groups[c.Group]; ok && old.Epoch > c.GroupConf.Epoch {
			return p, Outcome{Value: old} // a later one is recorded
		}
		p = p.clone()
		p.Groups[c.Group] = *c.GroupConf
		return p, Outcome{Value: *c.GroupConf}
	}
	return p, Outcome{Err: refuse.Invalidf("op", fmt.Sprintf("%q is not a meta operation", c.Op))}
}

func (p Policy) isZero() bool {
	return p.Replicas == 0 && len(p.Draining) == 0 && len(p.Groups) == 0 && len(p.Decisions) == 0 && p.NextDecision == 0 && len(p.Constraints) == 0
}

// inFlight is the index of the group's decision in flight, or -1.
func (p Policy) inFlight(group uint64) int {
	return slices.IndexFunc(p.Decisions, func(d Decision) bool { return d.Group == group && d.State == DecisionInFlight })
}

// InFlight is the group's decision in flight, if any.
func (p Policy) InFlight(group uint64) (Decision, bool) {
	if i := p.inFlight(group); i >= 0 {
		return p.Decisions[i], true
	}
	return Decision{}, false
}

// clone is p with its slices and map copied, to change without touching
// the applied state.
func (p Policy) clone() Policy {
	p.Draining = slices.Clone(p.Draining)
	p.Decisions = slices.Clone(p.Decisions)
	p.Constraints = slices.Clone(p.Constraints)
	g := make(map[uint64]GroupConf, len(p.Groups)+1)
	maps.Copy(g, p.Groups)
	p.Groups = g
	return p
}

// dropEnded drops the n oldest ended decisions (those in flight stay).
func dropEnded(ds []Decision, n int) []Decision {
	return slices.DeleteFunc(ds, func(d Decision) bool {
		if n > 0 && d.State != DecisionInFlight {
			n--
			return true
		}
		return false
	})
}

// OpConfigure records the replication factor (MetaCommand.Replicas).
const OpConfigure = "cluster.configure"

// kindPolicy keys the meta group's Policy.
const kindPolicy = 'c'

// decideConfigure sets the replication factor: odd and at least 1. More
// replicas than members is accepted; the groups are then reported short
// of their goal.
func decideConfigure(p Policy, c MetaCommand) (Policy, Outcome) {
	if err := CheckReplicas(c.Replicas); err != nil {
		return p, Outcome{Err: err}
	}
	was := p.Replicas
	p = p.clone()
	p.Replicas = c.Replicas
	return p, Outcome{Value: Configured{Replicas: p.Replicas, Was: was}}
}

// CheckReplicas refuses a replication factor that is not odd and at
// least 1, naming the field.
func CheckReplicas(n int) error {
	if err := placement.CheckReplicas(n); err != nil {
		return refuse.Invalidf("replicas", err.Error())
	}
	return nil
}

// Configured is a configure's outcome: the factor now, and before.
type Configured struct {
	Replicas int `json:"replicas"`
	Was      int `json:"was"`
}

func (c Configured) String() string {
	if c.Was == 0 {
		return fmt.Sprintf("replicas %d (was every member)", c.Replicas)
	}
	return fmt.Sprintf("replicas %d (was %d)", c.Replicas, c.Was)
}

// Policy is the placement policy as this replica has applied it.
func (m *metaSM) Policy() Policy {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy
}
