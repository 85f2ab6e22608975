package replica

import (
	"cmp"
	"fmt"
	"slices"

	"tally/vocab"
)

// OpLiveness commits a settled liveness fact about a node
// (MetaCommand.Liveness): an operator's mark-dead, or the failure
// detector's verdict.
const OpLiveness = "node.liveness"

// Liveness states and sources. Stored: do not rename.
const (
	LivenessAlive = "alive"
	LivenessDead  = "dead"

	LivenessOperator = "operator"
	LivenessDetector = "detector"
)

// LivenessFact is the meta group's settled word on a node at an
// incarnation. Stored: do not rename the members.
type LivenessFact struct {
	Node        uint64 `json:"node"`
	Incarnation uint64 `json:"incarnation"`
	State       string `json:"state"`  // LivenessAlive or LivenessDead
	Source      string `json:"source"` // LivenessOperator or LivenessDetector
	Reason      string `json:"reason,omitempty"`
	TS          int64  `json:"ts,omitempty"`
}

// decideLiveness records a fact: refused for a node that is not a member,
// and for an incarnation below the one recorded (stale). At the same
// incarnation a live node may be found dead, but a dead one comes back
// only with a higher incarnation; the same state again changes nothing. A
// higher incarnation replaces the fact.
func decideLiveness(facts []LivenessFact, members []Member, c MetaCommand) ([]LivenessFact, Outcome) {
	f := c.Liveness
	if f == nil || f.Node == 0 {
		return facts, Outcome{Err: vocab.Invalidf("liveness", "required, with a node")}
	}
	if f.State != LivenessAlive && f.State != LivenessDead {
		return facts, Outcome{Err: vocab.Invalidf("liveness.state", fmt.Sprintf("%q is not alive or dead", f.State))}
	}
	if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == f.Node }) {
		return facts, Outcome{Err: vocab.NotFoundf("node", fmt.Sprintf("node %d is not a member", f.Node))}
	}
	i := slices.IndexFunc(facts, func(x LivenessFact) bool { return x.Node == f.Node })
	if i >= 0 {
		old := facts[i]
		switch {
		case f.Incarnation < old.Incarnation:
			return facts, Outcome{Err: vocab.Conflictf("liveness.incarnation", fmt.Sprintf("node %d is at incarnation %d; %d is stale", f.Node, old.Incarnation, f.Incarnation))}
		case f.Incarnation == old.Incarnation && old.State == f.State:
			return facts, Outcome{Value: old}
		case f.Incarnation == old.Incarnation && old.State == LivenessDead:
			return facts, Outcome{Err: vocab.Conflictf("liveness.state", fmt.Sprintf("node %d is dead at incarnation %d: a dead node comes back only with a higher incarnation", f.Node, old.Incarnation))}
		}
	}
	nf := *f
	if nf.TS == 0 {
		nf.TS = c.TS
	}
	out := slices.Clone(facts)
	if i >= 0 {
		out[i] = nf
	} else {
		out = append(out, nf)
		slices.SortFunc(out, func(a, b LivenessFact) int { return cmp.Compare(a.Node, b.Node) })
	}
	return out, Outcome{Value: nf}
}

// Liveness is the node's committed liveness fact, if any.
func (m *metaSM) Liveness(node uint64) (LivenessFact, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.liveness {
		if f.Node == node {
			return f, true
		}
	}
	return LivenessFact{}, false
}
