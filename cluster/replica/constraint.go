package replica

// Constraints: an operator limits where a tenant's or a session's groups
// keep their voters (tally cluster constrain). The meta group records
// each in its policy; a group's effective constraint is the intersection
// of the constraints of the sessions it holds (a session's own and its
// tenant's), and the placement rule keeps that group's voters inside it.
// Which sessions a group holds is what the directory says: a session
// constrained by name is in its group (GroupOf); a tenant's constraint
// binds the groups of the tenant's sessions the directory records
// (placed, or constrained by name).

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/refuse"
	"tally/sessionname"
)

// OpConstrain records or clears a tenant's or a session's constraint
// (MetaCommand.Constraint).
const OpConstrain = "placement.constrain"

// CodeConstraintUnmet refuses a constraint no set of live members can
// meet, or one that conflicts with another session's in the same group.
const CodeConstraintUnmet refuse.Code = "ConstraintUnmet"

// ConstraintEntry is a tenant's (Session empty) or a session's
// constraint. Stored in the meta group's policy: do not rename the
// members.
type ConstraintEntry struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session,omitempty"`
	placement.Constraint
	// Clear, in a command only, removes the entry.
	Clear bool `json:"clear,omitempty"`
}

// Name is "tenant" or "tenant/session".
func (e ConstraintEntry) Name() string {
	if e.Session == "" {
		return e.Tenant
	}
	return e.Tenant + "/" + e.Session
}

// Of names the entry for a message: "tenant acme" or "session acme/s1".
func (e ConstraintEntry) Of() string {
	if e.Session == "" {
		return "tenant " + e.Tenant
	}
	return "session " + e.Name()
}

// PlacementNodes are the members as placement sees them: labels, drains,
// committed liveness, and each node's replicas and leaderships counted
// from the groups' recorded configurations (the meta group's leadership
// among them).
func PlacementNodes(members []Member, pol Policy, liveness func(uint64) (LivenessFact, bool)) []placement.Node {
	out := make([]placement.Node, 0, len(members))
	for _, m := range members {
		n := placement.Node{ID: m.ID, Zone: m.Zone, Region: m.Region, Draining: slices.Contains(pol.Draining, m.ID)}
		if f, ok := liveness(m.ID); ok && f.State == LivenessDead {
			n.Dead = true
		}
		for g, conf := range pol.Groups {
			// Leading the meta group is work like leading any group, so it
			// counts in the spread; its replicas do not count, since every
			// member follows it.
			if conf.Leader == m.ID {
				n.Leaders++
			}
			if g == node.MetaGroup {
				continue
			}
			if slices.Contains(conf.Voters, m.ID) || slices.Contains(conf.Learners, m.ID) {
				n.Replicas++
				n.Bytes += conf.Bytes
			}
		}
		out = append(out, n)
	}
	return out
}

// factsOf looks a node's fact up in facts (sorted by node).
func factsOf(facts []LivenessFact) func(uint64) (LivenessFact, bool) {
	return func(id uint64) (LivenessFact, bool) {
		i, ok := slices.BinarySearchFunc(facts, id, func(x LivenessFact, n uint64) int { return cmp.Compare(x.Node, n) })
		if !ok {
			return LivenessFact{}, false
		}
		return facts[i], true
	}
}

// Constrained is where constraints bind: for each entry, the groups it
// binds, as the directory places sessions.
type Constrained struct {
	Entry  ConstraintEntry
	Groups []uint64
}

// ConstraintGroups lists each constraint with the groups it binds:
// groupOf is the directory's routing, placements its recorded sessions.
func ConstraintGroups(entries []ConstraintEntry, placements []Placement, groupOf func(tenant, session string) uint64) []Constrained {
	out := make([]Constrained, 0, len(entries))
	for _, e := range entries {
		var gs []uint64
		add := func(g uint64) {
			if !slices.Contains(gs, g) {
				gs = append(gs, g)
			}
		}
		if e.Session != "" {
			add(groupOf(e.Tenant, e.Session))
		} else {
			for _, p := range placements {
				if p.Tenant == e.Tenant {
					add(p.Group)
				}
			}
			for _, o := range entries {
				if o.Tenant == e.Tenant && o.Session != "" {
					add(groupOf(o.Tenant, o.Session))
				}
			}
		}
		slices.Sort(gs)
		out = append(out, Constrained{Entry: e, Groups: gs})
	}
	return out
}

// GroupConstraints is each constrained group's effective constraint:
// the intersection of those binding it. A group whose constraints have
// nothing in common (refused when recorded, so only after a placement
// changed) keeps the first one's.
func GroupConstraints(bound []Constrained) map[uint64]placement.Constraint {
	out := map[uint64]placement.Constraint{}
	for _, b := range bound {
		for _, g := range b.Groups {
			cur, ok := out[g]
			if !ok {
				out[g] = b.Entry.Constraint
				continue
			}
			if both, ok := cur.Intersect(b.Entry.Constraint); ok {
				out[g] = both
			}
		}
	}
	return out
}

// CheckConstraintEntry checks an entry's names and labels' shape.
func CheckConstraintEntry(e ConstraintEntry) error {
	if err := sessionname.Check("tenant", e.Tenant); err != nil {
		return refuse.Invalidf("tenant", fmt.Sprintf("%q %s", e.Tenant, strings.TrimPrefix(err.Error(), "tenant: ")))
	}
	if e.Session != "" {
		if err := sessionname.Check("session", e.Session); err != nil {
			return refuse.Invalidf("session", fmt.Sprintf("%q %s", e.Session, strings.TrimPrefix(err.Error(), "session: ")))
		}
	}
	if e.Clear {
		if !e.IsZero() {
			return refuse.Invalidf("clear", "given with regions or zones: clear removes the constraint")
		}
		return nil
	}
	if e.IsZero() {
		return refuse.Invalidf("regions", "required: --regions R1,R2 or --zones Z1,Z2 (or --clear)")
	}
	if len(e.Regions) > 0 && len(e.Zones) > 0 {
		return refuse.Invalidf("zones", "given with regions: constrain by one of them")
	}
	return nil
}

// decideConstrain records or clears a constraint, refusing one no live
// members can meet or one that conflicts, in a group it binds, with
// another's. Pure: every replica decides from the same committed facts.
func decideConstrain(st metaState, c MetaCommand, groups int) (Policy, Outcome) {
	p := st.Policy
	e := c.Constraint
	if e == nil {
		return p, Outcome{Err: refuse.Invalidf("constraint", "required: a tenant, or a tenant and session, with regions or zones")}
	}
	if err := CheckConstraintEntry(*e); err != nil {
		return p, Outcome{Err: err}
	}
	i := slices.IndexFunc(p.Constraints, func(x ConstraintEntry) bool { return x.Name() == e.Name() })
	if e.Clear {
		if i < 0 {
			return p, Outcome{Value: *e} // cleared already: a retry
		}
		p = p.clone()
		p.Constraints = slices.Delete(p.Constraints, i, i+1)
		return p, Outcome{Value: *e}
	}
	entry := ConstraintEntry{Tenant: e.Tenant, Session: e.Session, Constraint: e.Constraint}
	if i >= 0 && p.Constraints[i].Constraint.Equal(entry.Constraint) {
		return p, Outcome{Value: p.Constraints[i]} // the same again
	}
	nodes := PlacementNodes(st.Members, p, factsOf(st.Liveness))
	replicas := p.Replicas
	if replicas == 0 {
		replicas = len(st.Members)
	}
	if err := placement.CheckMet(nodes, entry.Constraint, replicas); err != nil {
		return p, Outcome{Err: refuse.New(CodeConstraintUnmet, entry.Field(), err.Error())}
	}
	groupOf := func(t, s string) uint64 {
		if g, ok := st.Dir.Group(t + "/" + s); ok {
			return g
		}
		return GroupOf(groups, t, s)
	}
	others := slices.DeleteFunc(slices.Clone(p.Constraints), func(x ConstraintEntry) bool { return x.Name() == entry.Name() })
	all := append(slices.Clone(others), entry)
	bound := ConstraintGroups(all, tenantPlacements(st.Dir, all), groupOf)
	mine := bound[len(bound)-1].Groups
	for _, b := range bound[:len(bound)-1] {
		for _, g := range b.Groups {
			if !slices.Contains(mine, g) {
				continue
			}
			if err := placement.CheckJoint(nodes, entry.Constraint, b.Entry.Constraint, replicas); err != nil {
				return p, Outcome{Err: refuse.New(CodeConstraintUnmet, entry.Field(), fmt.Sprintf(
					"conflicts with %s's constraint (%s) in group %d: %v; tally cluster move moves a session to another group", b.Entry.Of(), b.Entry.Constraint, g, err))}
			}
		}
	}
	p = p.clone()
	if i >= 0 {
		p.Constraints[i] = entry
	} else {
		p.Constraints = append(p.Constraints, entry)
		slices.SortFunc(p.Constraints, func(a, b ConstraintEntry) int { return cmp.Compare(a.Name(), b.Name()) })
	}
	return p, Outcome{Value: entry}
}

// Field names the field a refusal of e is about.
func (e ConstraintEntry) Field() string {
	if len(e.Regions) > 0 {
		return "regions"
	}
	return "zones"
}

// tenantPlacements are the directory's placements of the tenants that
// entries constrain whole (the only placements ConstraintGroups reads),
// each tenant's read from the ranges that hold its names.
func tenantPlacements(dir *Directory, entries []ConstraintEntry) []Placement {
	var out []Placement
	var seen []string
	for _, e := range entries {
		if e.Session != "" || slices.Contains(seen, e.Tenant) {
			continue
		}
		seen = append(seen, e.Tenant)
		for _, de := range dir.Prefix(e.Tenant + "/") {
			if de.Group != 0 {
				out = append(out, placementOf(de))
			}
		}
	}
	return out
}

// Constraints are the recorded constraints as this replica has applied
// the meta group, with the groups each binds, and each constrained
// group's effective constraint.
func (m *metaSM) Constraints() ([]Constrained, map[uint64]placement.Constraint) {
	m.mu.Lock()
	entries, dir := slices.Clone(m.policy.Constraints), m.dir
	m.mu.Unlock()
	bound := ConstraintGroups(entries, tenantPlacements(dir, entries), m.GroupOf)
	return bound, GroupConstraints(bound)
}
