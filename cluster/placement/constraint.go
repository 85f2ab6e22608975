package placement

import (
	"fmt"
	"slices"
)

// Intersect is the constraint a group must meet when it holds sessions
// constrained by both c and o: the regions both admit and the zones both
// admit (a list left empty admits every one). ok is false when nothing
// is admitted by both: the regions, or the zones, have none in common.
func (c Constraint) Intersect(o Constraint) (Constraint, bool) {
	common := func(a, b []string) ([]string, bool) {
		switch {
		case len(a) == 0:
			return slices.Clone(b), true
		case len(b) == 0:
			return slices.Clone(a), true
		}
		var out []string
		for _, x := range a {
			if slices.Contains(b, x) {
				out = append(out, x)
			}
		}
		return out, len(out) > 0
	}
	regions, ok := common(c.Regions, o.Regions)
	if !ok {
		return Constraint{}, false
	}
	zones, ok := common(c.Zones, o.Zones)
	if !ok {
		return Constraint{}, false
	}
	return Constraint{Regions: regions, Zones: zones}, true
}

// Equal reports whether c and o name the same regions and zones, in any
// order.
func (c Constraint) Equal(o Constraint) bool {
	same := func(a, b []string) bool {
		a, b = slices.Clone(a), slices.Clone(b)
		slices.Sort(a)
		slices.Sort(b)
		return slices.Equal(a, b)
	}
	return same(c.Regions, o.Regions) && same(c.Zones, o.Zones)
}

// CheckMet refuses a constraint no set of live members can meet: one
// CheckConstraint refuses, or one with fewer live members that are not
// draining in it than the group's goal asks (min(replicas, live
// members)): its voters could not all be inside it.
func CheckMet(nodes []Node, c Constraint, replicas int) error {
	if err := CheckConstraint(nodes, c); err != nil {
		return err
	}
	return checkCount(nodes, c, replicas)
}

// checkCount refuses a constraint with fewer eligible members than the
// goal the factor asks of a group on the live members.
func checkCount(nodes []Node, c Constraint, replicas int) error {
	in, all := len(eligible(nodes, c)), len(eligible(nodes, Constraint{}))
	if want := min(replicas, all); in < want {
		return fmt.Errorf("only %d live member%s that %s not draining %s inside the constraint (%s), and a group's %d voters must be: the constraint cannot be met", in, plural(in), isAre(in), isAre(in), c, want)
	}
	return nil
}

// CheckJoint refuses adding constraint c to a group whose sessions are
// constrained by other already (the group's intersection of theirs): no
// member is admitted by both, or too few live ones for the group's
// goal. The error says only why; the caller names the session.
func CheckJoint(nodes []Node, c, other Constraint, replicas int) error {
	both, ok := c.Intersect(other)
	if !ok {
		return fmt.Errorf("no region or zone is in both (%s) and (%s)", c, other)
	}
	if err := checkCount(nodes, both, replicas); err != nil {
		return fmt.Errorf("together (%s): %w", both, err)
	}
	return nil
}

// Meets reports whether every voter is admitted by c and at a live
// member.
func Meets(nodes []Node, voters []uint64, c Constraint) bool {
	for _, v := range voters {
		if n, ok := byIDOf(nodes, v); !ok || n.Dead || !c.Admits(n) {
			return false
		}
	}
	return len(voters) > 0
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}
