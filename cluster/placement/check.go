package placement

import (
	"fmt"
	"slices"
	"strings"
)

// CheckReplicas refuses a replication factor that is not odd and
// positive: an even number of voters tolerates no more failures than one
// fewer, and costs a copy more.
func CheckReplicas(n int) error {
	if n < 1 || n%2 == 0 {
		return fmt.Errorf("%d is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer", n)
	}
	return nil
}

// CheckConstraint refuses a constraint that names a zone or region no
// member has, or one with no live member to place on: it could not be
// met. A constraint with fewer eligible members than the replication
// factor is accepted, and its groups are reported short of their goal.
func CheckConstraint(nodes []Node, c Constraint) error {
	if c.IsZero() {
		return fmt.Errorf("no regions or zones given")
	}
	if len(c.Regions) > 0 && len(c.Zones) > 0 {
		return fmt.Errorf("regions and zones both given: constrain by one of them")
	}
	check := func(kind string, names []string, of func(Node) string) error {
		for i, name := range names {
			if name == "" {
				return fmt.Errorf("%ss: an empty %s", kind, kind)
			}
			if slices.Contains(names[:i], name) {
				return fmt.Errorf("%ss: %s %q is named twice", kind, kind, name)
			}
			known, alive := false, false
			for _, n := range nodes {
				if of(n) == name {
					known = true
					alive = alive || (!n.Dead && !n.Draining)
				}
			}
			if !known {
				return fmt.Errorf("%ss: no member is in %s %q (the members' %ss: %s)", kind, kind, name, kind, strings.Join(labels(nodes, of), ", "))
			}
			if !alive {
				return fmt.Errorf("%ss: %s %q has no live member that is not draining: the constraint cannot be met", kind, kind, name)
			}
		}
		return nil
	}
	if err := check("region", c.Regions, func(n Node) string { return n.Region }); err != nil {
		return err
	}
	return check("zone", c.Zones, func(n Node) string { return n.Zone })
}

// labels are the distinct labels of the nodes, sorted.
func labels(nodes []Node, of func(Node) string) []string {
	var out []string
	for _, n := range nodes {
		if l := of(n); l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// CheckDrain refuses draining a node when the members left cannot hold
// what the groups want: fewer eligible members after the drain than
// min(replicas, eligible members before), overall or under any of the
// constraints given.
func CheckDrain(nodes []Node, id uint64, replicas int, constraints []Constraint) error {
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == id })
	if i < 0 {
		return fmt.Errorf("node %d is not a member", id)
	}
	if nodes[i].Draining {
		return nil // a drain asked again answers as the first
	}
	after := slices.Clone(nodes)
	after[i].Draining = true
	for _, c := range append([]Constraint{{}}, constraints...) {
		before, left := len(eligible(nodes, c)), len(eligible(after, c))
		if left < min(replicas, before) {
			where := ""
			if !c.IsZero() {
				where = " under the constraint (" + c.String() + ")"
			}
			return fmt.Errorf("node %d cannot be drained: %d eligible members would be left%s, and %d replicas are wanted", id, left, where, min(replicas, before))
		}
	}
	return nil
}
