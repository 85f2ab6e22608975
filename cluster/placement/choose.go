package placement

import (
	"cmp"
	"fmt"
	"slices"
)

// byIDOf looks a node up by id.
func byIDOf(nodes []Node, id uint64) (Node, bool) {
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.ID == id })
	if i < 0 {
		return Node{}, false
	}
	return nodes[i], true
}

// unfit says why a node should not hold a replica of the group.
func unfit(byID map[uint64]Node, c Constraint, id uint64) string {
	n, ok := byID[id]
	switch {
	case !ok:
		return fmt.Sprintf("node %d is not a member", id)
	case n.Dead:
		return fmt.Sprintf("node %d is dead", id)
	case n.Draining:
		return fmt.Sprintf("node %d is draining", id)
	case !c.Admits(n):
		return fmt.Sprintf("node %d (zone %q, region %q) is outside the constraint (%s)", id, n.Zone, n.Region, c)
	}
	return fmt.Sprintf("node %d is fit", id)
}

// live reports whether a voter counts toward a quorum: a member not
// committed dead (a draining node still votes).
func live(byID map[uint64]Node, id uint64) bool {
	n, ok := byID[id]
	return ok && !n.Dead
}

// SafeRemoval reports whether removing voter id from voters keeps a
// quorum of live voters in the configuration left, and a voter at all.
func SafeRemoval(nodes []Node, voters []uint64, id uint64) bool {
	byID := make(map[uint64]Node, len(nodes))
	for _, n := range nodes {
		byID[n.ID] = n
	}
	return safeRemoval(byID, voters, id)
}

func safeRemoval(byID map[uint64]Node, voters []uint64, id uint64) bool {
	left := slices.DeleteFunc(slices.Clone(voters), func(v uint64) bool { return v == id })
	if len(left) == len(voters) || len(left) == 0 {
		return false
	}
	return countFunc(left, func(v uint64) bool { return live(byID, v) }) >= len(left)/2+1
}

// removal is the voter to remove from a group beyond its goal: the first
// unfit one whose removal is safe (not a member, then dead, then
// draining, then outside the constraint), else the one whose removal
// keeps the widest spread, then the most loaded, then the highest id.
func removal(byID map[uint64]Node, g Group, good func(uint64) bool) (uint64, bool) {
	rank := func(id uint64) int {
		n, ok := byID[id]
		switch {
		case !ok:
			return 0
		case n.Dead:
			return 1
		case n.Draining:
			return 2
		case !good(id):
			return 3
		}
		return 4
	}
	var pick uint64
	var pickSpread spread
	for _, v := range g.Voters {
		if !safeRemoval(byID, g.Voters, v) {
			continue
		}
		left := slices.DeleteFunc(slices.Clone(g.Voters), func(x uint64) bool { return x == v })
		s := spreadOf(byID, left)
		if pick == 0 || better(rank(v), rank(pick), s, pickSpread, byID[v], byID[pick]) {
			pick, pickSpread = v, s
		}
	}
	return pick, pick != 0
}

// better reports whether removing voter a (of fitness rank ra, leaving
// spread sa) is preferred over removing b.
func better(ra, rb int, sa, sb spread, a, b Node) bool {
	if ra != rb {
		return ra < rb
	}
	if c := sa.compare(sb); c != 0 {
		return c > 0
	}
	if a.Replicas != b.Replicas {
		return a.Replicas > b.Replicas
	}
	if a.Bytes != b.Bytes {
		return a.Bytes > b.Bytes
	}
	return a.ID > b.ID
}

// best is the eligible node not in the group (nor in skip) that widens
// the group's spread the most, then the least loaded, then the lowest id.
func best(nodes []Node, byID map[uint64]Node, g Group, skip []uint64) (uint64, bool) {
	held := append(slices.Clone(g.Voters), g.Learners...)
	var pick Node
	var pickSpread spread
	found := false
	for _, n := range eligible(nodes, g.Constraint) {
		if slices.Contains(held, n.ID) || slices.Contains(skip, n.ID) {
			continue
		}
		s := spreadOf(byID, append(goodOnly(byID, g, held), n.ID))
		if !found || s.compare(pickSpread) > 0 || (s.compare(pickSpread) == 0 && lighter(n, pick)) {
			pick, pickSpread, found = n, s, true
		}
	}
	return pick.ID, found
}

// goodOnly is held without the nodes that should not hold the group.
func goodOnly(byID map[uint64]Node, g Group, held []uint64) []uint64 {
	return slices.DeleteFunc(slices.Clone(held), func(id uint64) bool {
		n, ok := byID[id]
		return !ok || n.Dead || n.Draining || !g.Constraint.Admits(n)
	})
}

// lighter reports whether a is less loaded than b.
func lighter(a, b Node) bool {
	if a.Replicas != b.Replicas {
		return a.Replicas < b.Replicas
	}
	if a.Bytes != b.Bytes {
		return a.Bytes < b.Bytes
	}
	return a.ID < b.ID
}

// spread counts the distinct regions and zones of a set of nodes.
type spread struct{ Regions, Zones, Nodes int }

func spreadOf(byID map[uint64]Node, ids []uint64) spread {
	regions, zones := map[string]bool{}, map[string]bool{}
	for _, id := range ids {
		n := byID[id]
		regions[n.Region] = true
		zones[n.Region+"\x00"+n.Zone] = true
	}
	return spread{Regions: len(regions), Zones: len(zones), Nodes: len(ids)}
}

// compare orders spreads: more regions, then more zones, then more nodes.
func (s spread) compare(o spread) int {
	return cmp.Or(cmp.Compare(s.Regions, o.Regions), cmp.Compare(s.Zones, o.Zones), cmp.Compare(s.Nodes, o.Nodes))
}

// wider reports whether s has more regions, or as many and more zones.
func (s spread) wider(o spread) bool {
	return s.Regions > o.Regions || (s.Regions == o.Regions && s.Zones > o.Zones)
}

func (s spread) String() string {
	return fmt.Sprintf("%d region%s, %d zone%s", s.Regions, plural(s.Regions), s.Zones, plural(s.Zones))
}
