package replica

// The meta group's directory (place.go says how a placement is made; its
// ranges are in directory_ranges.go).

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/refuse"
)

// decidePlacementIn records a placement in the directory, pure, in a
// cluster whose names hash over groups data groups and which has all of
// them (the added ones too). A placement recorded is final (a move changes
// it): the same one again answers as the first, another group is refused.
// A session placed in its hash's group needs no record. A record raises
// the session's epoch. It touches the one range that holds the name.
func decidePlacementIn(dir *Directory, groups, all int, p *Placement) (*Directory, Outcome) {
	if p == nil {
		return dir, Outcome{Err: refuse.Invalidf("placement", "required: tenant, session and group")}
	}
	if err := CheckPlacement(*p, all); err != nil {
		return dir, Outcome{Err: err}
	}
	e, _ := dir.Get(p.Name())
	if e.Group != 0 {
		if e.Group == p.Group {
			return dir, Outcome{Value: *p}
		}
		return dir, Outcome{Err: refuse.Conflictf("group", fmt.Sprintf("session %s is placed in group %d; moving a session is not supported yet", p.Name(), e.Group))}
	}
	if p.Group == GroupOf(groups, p.Tenant, p.Session) {
		return dir, Outcome{Value: *p}
	}
	return dir.Set(DirEntry{Name: p.Name(), Group: p.Group, Epoch: e.Epoch + 1}), Outcome{Value: *p}
}

// GroupOf is the data group the directory routes a session to, as this
// replica has applied the meta group: its recorded placement, else the
// hash of its name.
func (m *metaSM) GroupOf(tenant, session string) uint64 {
	m.mu.Lock()
	dir := m.dir
	m.mu.Unlock()
	if g, ok := dir.Group(tenant + "/" + session); ok {
		return g
	}
	return GroupOf(m.cfg.Groups, tenant, session)
}

// Placements are the directory's recorded placements as this replica has
// applied them, by name: the whole directory (PlacementsFrom pages it).
func (m *metaSM) Placements() []Placement {
	return placementsOf(m.Directory(), "", -1)
}

// PlacementsFrom is one page of the directory's recorded placements, as
// this replica has applied them: at most limit, in name order, after the
// name after ("" from the first). It reads only the ranges the page spans.
func (m *metaSM) PlacementsFrom(after string, limit int) []Placement {
	return placementsOf(m.Directory(), after, limit)
}

// placementsOf lists at most limit (all, if negative) of dir's recorded
// placements after the name after.
func placementsOf(dir *Directory, after string, limit int) []Placement {
	var out []Placement
	each := func(e DirEntry) bool {
		if e.Group != 0 && (after == "" || e.Name > after) {
			out = append(out, placementOf(e))
		}
		return limit < 0 || len(out) < limit
	}
	if limit < 0 {
		dir.Each(each)
		return out
	}
	for len(out) < limit {
		want := limit - len(out)
		page := dir.From(after, want)
		for _, e := range page {
			each(e)
		}
		if len(page) < want {
			break // the directory's end
		}
		after = page[len(page)-1].Name
	}
	return out
}

func placementOf(e DirEntry) Placement {
	t, s, _ := strings.Cut(e.Name, "/")
	return Placement{Tenant: t, Session: s, Group: e.Group}
}

// PlacementCount is how many placements the directory records, as this
// replica has applied it.
func (m *metaSM) PlacementCount() int {
	return m.Directory().Placed()
}

// Directory is the directory as this replica has applied it: an
// immutable value, safe to read while the replica applies more.
func (m *metaSM) Directory() *Directory {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dir
}

// writeDirectory writes the directory's changes from old to dir into pb:
// each session's placement and epoch under its own key, as before the
// directory had ranges. Only the ranges dir does not share with old are
// read.
func writeDirectory(pb *pebble.Batch, old, dir *Directory) error {
	if old == dir {
		return nil
	}
	gone, fresh := changedRanges(old, dir)
	for _, r := range fresh {
		for _, e := range r.entries {
			o, _ := old.Get(e.Name)
			if err := writeDirEntry(pb, o, e); err != nil {
				return err
			}
		}
	}
	for _, r := range gone {
		for _, o := range r.entries {
			if _, ok := dir.Get(o.Name); !ok {
				if err := writeDirEntry(pb, o, DirEntry{Name: o.Name}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// writeDirEntry writes what changed from o to e, one session's entry.
func writeDirEntry(pb *pebble.Batch, o, e DirEntry) error {
	if o.Group != e.Group {
		k := nameKey(node.MetaGroup, kindPlacement, e.Name)
		if e.Group == 0 {
			if err := pb.Delete(k, nil); err != nil {
				return err
			}
		} else if err := setJSON(pb, k, groupRecord{Group: e.Group}); err != nil {
			return err
		}
	}
	if o.Epoch != e.Epoch {
		k := nameKey(node.MetaGroup, kindEpoch, e.Name)
		if e.Epoch == 0 {
			return pb.Delete(k, nil)
		}
		return setJSON(pb, k, epochRecord{Epoch: e.Epoch})
	}
	return nil
}

// loadDirectory reads the directory from pebble: the placements' keys and
// the epochs' (epochs, read with the moves), laid out in ranges.
func (m *metaSM) loadDirectory(epochs map[string]uint64) (*Directory, error) {
	placements, err := m.scanGroups(gkey(node.MetaGroup, kindPlacement))
	if err != nil {
		return nil, err
	}
	return directoryOf(ruleOf(m.cfg), placements, epochs), nil
}

// directoryOf is the directory of these placements and epochs, by name,
// laid out by rule.
func directoryOf(rule rangeRule, placements, epochs map[string]uint64) *Directory {
	byName := make(map[string]DirEntry, len(placements))
	for name, g := range placements {
		byName[name] = DirEntry{Name: name, Group: g}
	}
	for name, ep := range epochs {
		e := byName[name]
		e.Name, e.Epoch = name, ep
		byName[name] = e
	}
	entries := make([]DirEntry, 0, len(byName))
	for _, e := range byName {
		entries = append(entries, e)
	}
	return newDirectoryRule(rule, entries)
}

// clearDirectory deletes every directory key, for a restore that writes
// the snapshot's.
func clearDirectory(pb *pebble.Batch) error {
	for _, kind := range []byte{kindPlacement, kindEpoch} {
		lo := gkey(node.MetaGroup, kind)
		hi := gkey(node.MetaGroup, kind+1)
		if err := pb.DeleteRange(lo, hi, nil); err != nil {
			return err
		}
	}
	return nil
}
