package replica

// The meta group's directory (place.go says how a placement is made).

import (
	"fmt"
	"maps"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/refuse"
)

// decidePlacement records a placement in the directory, pure. A placement
// recorded is final until sessions can move: the same one again answers
// as the first, another group is refused. A session placed in its hash's
// group needs no record.
func decidePlacement(placements map[string]uint64, groups int, p *Placement) (map[string]uint64, Outcome) {
	return decidePlacementIn(placements, groups, groups, p)
}

// decidePlacementIn is decidePlacement in a cluster whose names hash over
// groups data groups and which has all of them (the added ones too).
func decidePlacementIn(placements map[string]uint64, groups, all int, p *Placement) (map[string]uint64, Outcome) {
	if p == nil {
		return placements, Outcome{Err: refuse.Invalidf("placement", "required: tenant, session and group")}
	}
	if err := CheckPlacement(*p, all); err != nil {
		return placements, Outcome{Err: err}
	}
	if g, ok := placements[p.Name()]; ok {
		if g == p.Group {
			return placements, Outcome{Value: *p}
		}
		return placements, Outcome{Err: refuse.Conflictf("group", fmt.Sprintf("session %s is placed in group %d; moving a session is not supported yet", p.Name(), g))}
	}
	if p.Group == GroupOf(groups, p.Tenant, p.Session) {
		return placements, Outcome{Value: *p}
	}
	out := maps.Clone(placements)
	if out == nil {
		out = map[string]uint64{}
	}
	out[p.Name()] = p.Group
	return out, Outcome{Value: *p}
}

// GroupOf is the data group the directory routes a session to, as this
// replica has applied the meta group: its recorded placement, else the
// hash of its name.
func (m *metaSM) GroupOf(tenant, session string) uint64 {
	m.mu.Lock()
	g, ok := m.placements[tenant+"/"+session]
	m.mu.Unlock()
	if ok {
		return g
	}
	return GroupOf(m.cfg.Groups, tenant, session)
}

// Placements are the directory's recorded placements as this replica has
// applied them, by name.
func (m *metaSM) Placements() []Placement {
	m.mu.Lock()
	defer m.mu.Unlock()
	return placementList(m.placements)
}

// PlacementCount is how many placements the directory records, as this
// replica has applied it.
func (m *metaSM) PlacementCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.placements)
}

// writePlacements writes the directory's changes from old to placements
// into pb.
func writePlacements(pb *pebble.Batch, old, placements map[string]uint64) error {
	for name, g := range placements {
		if og, ok := old[name]; ok && og == g {
			continue
		}
		if err := setJSON(pb, nameKey(node.MetaGroup, kindPlacement, name), groupRecord{Group: g}); err != nil {
			return err
		}
	}
	for name := range old {
		if _, ok := placements[name]; !ok {
			if err := pb.Delete(nameKey(node.MetaGroup, kindPlacement, name), nil); err != nil {
				return err
			}
		}
	}
	return nil
}
