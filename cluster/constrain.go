package cluster

// Constraints (tally cluster constrain TENANT[/SESSION] --regions … |
// --zones … | --clear), asked by an operator with a request signed by the
// join secret. A constraint is checked against the committed facts up
// front (a label no member declared, too few live members inside it, a
// conflict with another session's constraint in the same group) and
// refused with nothing recorded; else the meta group records it
// (replica.OpConstrain, which checks it again as it applies it) and the
// placement driver keeps the bound groups' voters inside it. A session
// with no records yet whose group's voters are outside the constraint is
// first placed in a group whose voters are inside it, when one is.

import (
	"context"
	"maps"
	"slices"
	"time"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/replica"
	"tally/refuse"
)

// ConstrainPath records or clears a constraint (signed).
const ConstrainPath = "/v1/cluster/constrain"

// ConstrainRequest constrains a tenant (Session empty) or a session to
// some regions or some zones; Clear removes its constraint.
type ConstrainRequest struct {
	Tenant  string   `json:"tenant"`
	Session string   `json:"session,omitempty"`
	Regions []string `json:"regions,omitempty"`
	Zones   []string `json:"zones,omitempty"`
	Clear   bool     `json:"clear,omitempty"`
	Signed
}

func (r *ConstrainRequest) envelope() (string, *Signed, []any) {
	return "constrain", &r.Signed, []any{r.Tenant, r.Session, r.Regions, r.Zones, r.Clear}
}

// Constrained answers a constrain: the entry recorded (or cleared), the
// groups it binds, and the group a session was placed in to meet it.
type Constrained struct {
	replica.ConstraintEntry
	Groups []uint64 `json:"groups"`
	// PlacedIn is set when the session was placed in another group whose
	// voters meet the constraint, from PlacedFrom.
	PlacedIn   uint64 `json:"placed_in,omitempty"`
	PlacedFrom uint64 `json:"placed_from,omitempty"`
}

// OpConstrain records or clears a constraint. Refused with nothing
// recorded: a malformed request (400), a constraint no live members can
// meet or one that conflicts with another in its group (409
// ConstraintUnmet).
func (c *Node) OpConstrain(ctx context.Context, decode Decode) (any, error) {
	var req ConstrainRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	e := replica.ConstraintEntry{Tenant: req.Tenant, Session: req.Session, Constraint: placement.Constraint{Regions: req.Regions, Zones: req.Zones}, Clear: req.Clear}
	if err := replica.CheckConstraintEntry(e); err != nil {
		return nil, refusal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, refusal(err)
	}
	out := Constrained{ConstraintEntry: e}
	if !e.Clear {
		if err := c.checkConstraint(e); err != nil {
			return nil, refusal(err)
		}
	}
	if err := c.spendNonce(ctx, &req.Signed); err != nil {
		return nil, refusal(err)
	}
	if !e.Clear && e.Session != "" {
		from := c.sm.GroupOf(e.Tenant, e.Session)
		if to, ok := c.constrainedGroup(e); ok && to != from {
			// A session with records stays where it is (the fence
			// refuses it) and its group's voters move instead.
			if _, err := c.Place(ctx, replica.Placement{Tenant: e.Tenant, Session: e.Session, Group: to}); err == nil {
				out.PlacedIn, out.PlacedFrom = to, from
			} else {
				c.log.Info("constrain: session stays in its group", "session", e.Name(), "group", from, "err", err)
			}
		}
	}
	v, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpConstrain, Constraint: &e})
	if err != nil {
		return nil, refusal(err)
	}
	if rec, ok := v.Value.(replica.ConstraintEntry); ok {
		out.ConstraintEntry = rec
		out.Clear = e.Clear
	}
	bound, _ := c.sm.Constraints()
	for _, b := range bound {
		if b.Entry.Name() == e.Name() {
			out.Groups = b.Groups
		}
	}
	out.Groups = nonNil(out.Groups)
	return out, nil
}

// checkConstraint refuses, before a nonce is spent, a constraint no live
// members can meet, or one that conflicts in its own group when the
// session cannot go elsewhere; the meta group checks it again as it
// applies it.
func (c *Node) checkConstraint(e replica.ConstraintEntry) error {
	pol := c.sm.Policy()
	nodes := placementNodes(c.sm.Members(), pol, c.sm.Liveness)
	if err := placement.CheckMet(nodes, e.Constraint, c.replicas(pol)); err != nil {
		return refuse.New(replica.CodeConstraintUnmet, e.Field(), err.Error())
	}
	return nil
}

// replicas is the factor the goal is counted from: every member before
// one is configured.
func (c *Node) replicas(pol replica.Policy) int {
	if pol.Replicas == 0 {
		return len(c.sm.Members())
	}
	return pol.Replicas
}

// constrainedGroup is the data group a session constrained by e should
// be in: its own when its recorded voters meet the constraint (and its
// tenant's) and no other session's constraint there conflicts; else the
// first group whose voters do and where none conflicts; else its own.
func (c *Node) constrainedGroup(e replica.ConstraintEntry) (uint64, bool) {
	pol := c.sm.Policy()
	nodes := placementNodes(c.sm.Members(), pol, c.sm.Liveness)
	replicas := c.replicas(pol)
	want := e.Constraint
	for _, o := range pol.Constraints {
		if o.Tenant == e.Tenant && o.Session == "" {
			if both, ok := want.Intersect(o.Constraint); ok {
				want = both
			}
		}
	}
	_, groups := c.sm.Constraints()
	fits := func(g uint64) bool {
		conf, ok := pol.Groups[g]
		if !ok || !placement.Meets(nodes, conf.Voters, want) {
			return false
		}
		other, bound := groups[g]
		return !bound || placement.CheckJoint(nodes, want, other, replicas) == nil
	}
	own := c.sm.GroupOf(e.Tenant, e.Session)
	if fits(own) {
		return own, true
	}
	for g := node.MetaGroup + 1; g <= node.MetaGroup+uint64(c.sm.DataGroups()); g++ {
		if fits(g) {
			return g, true
		}
	}
	return own, false
}

// constraintsOf lists the effective constraints, for CheckDrain.
func constraintsOf(groups map[uint64]placement.Constraint) []placement.Constraint {
	out := make([]placement.Constraint, 0, len(groups))
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		out = append(out, groups[g])
	}
	return out
}
