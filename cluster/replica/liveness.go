package replica

import (
	"cmp"
	"fmt"
	"slices"

	"tally/refuse"
)

// OpLiveness records a settled liveness fact of a member: alive or dead
// at an incarnation, never a passing suspicion. The meta group's leader
// commits the failure detector's (Source "detector"); tally cluster
// mark-dead an operator's (Source "operator"). The placement driver acts
// on these facts only.
const OpLiveness = "node.liveness"

// Liveness states and sources (stored: do not rename).
const (
	LivenessAlive = "alive"
	LivenessDead  = "dead"

	LivenessOperator = "operator"
	LivenessDetector = "detector"
)

// LivenessFact is a member's settled liveness at an incarnation. Stored
// in the meta group's state and log: do not rename the members.
type LivenessFact struct {
	Node        uint64 `json:"node"`
	Incarnation uint64 `json:"incarnation"`
	State       string `json:"state"`  // LivenessAlive | LivenessDead
	Source      string `json:"source"` // LivenessOperator | LivenessDetector
	Reason      string `json:"reason,omitempty"`
	TS          int64  `json:"ts,omitempty"` // Unix nanoseconds, the proposer's clock
}

// decideLiveness records c's fact: a member's first, or one that moves it
// forward. An incarnation never goes backwards: one below the recorded
// fact's is refused as stale. At the same incarnation alive → dead is
// taken and dead → alive refused (a dead node comes back only with a
// higher incarnation); the same state again changes nothing and succeeds.
// A higher incarnation replaces the fact. facts stay sorted by node.
func decideLiveness(facts []LivenessFact, members []Member, c MetaCommand) ([]LivenessFact, Outcome) {
	f := c.Liveness
	switch {
	case f == nil:
		return facts, Outcome{Err: refuse.Invalidf("liveness", "required")}
	case f.State != LivenessAlive && f.State != LivenessDead:
		return facts, Outcome{Err: refuse.Invalidf("liveness.state", fmt.Sprintf("%q: must be %s or %s", f.State, LivenessAlive, LivenessDead))}
	case f.Source != LivenessOperator && f.Source != LivenessDetector:
		return facts, Outcome{Err: refuse.Invalidf("liveness.source", fmt.Sprintf("%q: must be %s or %s", f.Source, LivenessOperator, LivenessDetector))}
	case !slices.ContainsFunc(members, func(m Member) bool { return m.ID == f.Node }):
		return facts, Outcome{Err: refuse.NotFoundf("node-id", fmt.Sprintf("node %d is not a member", f.Node))}
	}
	i, found := slices.BinarySearchFunc(facts, f.Node, func(x LivenessFact, n uint64) int { return cmp.Compare(x.Node, n) })
	if found {
		old := facts[i]
		switch {
		case f.Incarnation < old.Incarnation:
			return facts, Outcome{Err: refuse.Conflictf("incarnation", fmt.Sprintf("%d is stale: node %d is recorded %s at incarnation %d, and an incarnation never goes backwards", f.Incarnation, f.Node, old.State, old.Incarnation))}
		case f.Incarnation == old.Incarnation && f.State == old.State:
			return facts, Outcome{Value: old}
		case f.Incarnation == old.Incarnation && old.State == LivenessDead:
			return facts, Outcome{Err: refuse.Conflictf("incarnation", fmt.Sprintf("node %d is recorded dead at incarnation %d: a dead node comes back only with a higher incarnation", f.Node, old.Incarnation))}
		}
		out := slices.Clone(facts)
		out[i] = *f
		return out, Outcome{Value: *f}
	}
	return slices.Insert(slices.Clone(facts), i, *f), Outcome{Value: *f}
}

// Liveness is node's settled liveness fact as this replica has applied
// it, if one was recorded.
func (m *metaSM) Liveness(node uint64) (LivenessFact, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, found := slices.BinarySearchFunc(m.liveness, node, func(x LivenessFact, n uint64) int { return cmp.Compare(x.Node, n) })
	if !found {
		return LivenessFact{}, false
	}
	return m.liveness[i], true
}

// LivenessFacts are every settled fact, by node.
func (m *metaSM) LivenessFacts() []LivenessFact {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.liveness)
}
