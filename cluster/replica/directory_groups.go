package replica

// Data groups added after the bootstrap (tally cluster groups add). The
// bootstrap's groups stay the ones a session's name hashes over, so an
// added group changes no session's route: a session reaches it by a
// placement or a move. Each added group is recorded with the voters it
// starts with, which the proposer chose from the members' load; every node
// opens the group as it applies the record, and those voters start it the
// way the bootstrap's voters start theirs. The placement driver then keeps
// it at the replication factor like any other group.

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/refuse"
	"tally/store"
)

// OpGroupsAdd records data groups added to the cluster.
const OpGroupsAdd = "groups.add"

// Bounds of the data groups.
const (
	// MaxDataGroups bounds a cluster's data groups, the bootstrap's and
	// the added ones together.
	MaxDataGroups = 1024
	// GroupsAddMax bounds the groups one request adds.
	GroupsAddMax = 64
)

// CodeStaleGroups: a groups.add decided at a count of groups that grew
// since (another add came first).
const CodeStaleGroups refuse.Code = "StaleGroups"

// kindGroups keys the meta group's added groups, stored whole (they are
// few). Stored: do not rename.
const kindGroups = 'g'

// AddedGroup is a data group added after the bootstrap, as the meta group
// records it. Stored: do not rename.
type AddedGroup struct {
	Group uint64 `json:"group"`
	// Voters are the members the group started with.
	Voters []uint64 `json:"voters"`
	// Added is the instant it was recorded (Unix nanoseconds, the
	// proposer's clock).
	Added int64 `json:"added"`
}

// GroupsAdd is a groups.add's document: the first new group's id (the
// groups the proposer saw, so two adds decided at the same count do not
// both take the same ids) and each new group's voters, in order.
type GroupsAdd struct {
	First  uint64     `json:"first"`
	Voters [][]uint64 `json:"voters"`
}

// CheckGroupsCount refuses a count of groups to add that is not 1 to
// GroupsAddMax, or that would take the cluster past MaxDataGroups.
func CheckGroupsCount(count, have int) error {
	switch {
	case count < 1 || count > GroupsAddMax:
		return refuse.Invalidf("count", fmt.Sprintf("%d: must be 1 to %d groups at a time", count, GroupsAddMax))
	case have+count > MaxDataGroups:
		return refuse.Invalidf("count", fmt.Sprintf("%d more would make %d data groups, more than %d", count, have+count, MaxDataGroups))
	}
	return nil
}

// decideGroupsAdd records the groups a groups.add adds, pure. hash is the
// bootstrap's data groups. The same request again (the same first id and
// voters, recorded) answers the groups it added.
func decideGroupsAdd(added []AddedGroup, hash int, members []Member, c MetaCommand) ([]AddedGroup, Outcome) {
	a := c.GroupsAdd
	if a == nil {
		return added, Outcome{Err: refuse.Invalidf("groups", "required: the first group and each group's voters")}
	}
	if err := CheckGroupsCount(len(a.Voters), 0); err != nil {
		return added, Outcome{Err: err}
	}
	next := node.MetaGroup + 1 + uint64(hash+len(added))
	if a.First != next {
		if got, ok := repeatedAdd(added, a); ok {
			return added, Outcome{Value: got}
		}
		return added, Outcome{Err: refuse.New(CodeStaleGroups, "groups", fmt.Sprintf("asked to add groups from %d, but group %d is the next: groups were added since; ask again", a.First, next))}
	}
	if err := CheckGroupsCount(len(a.Voters), hash+len(added)); err != nil {
		return added, Outcome{Err: err}
	}
	out := slices.Clone(added)
	for i, vs := range a.Voters {
		if err := checkVoters(vs, members); err != nil {
			return added, Outcome{Err: err}
		}
		out = append(out, AddedGroup{Group: next + uint64(i), Voters: slices.Clone(vs), Added: c.TS})
	}
	return out, Outcome{Value: out[len(added):]}
}

// repeatedAdd is the groups a request recorded already added, when it is
// one.
func repeatedAdd(added []AddedGroup, a *GroupsAdd) ([]AddedGroup, bool) {
	i := slices.IndexFunc(added, func(g AddedGroup) bool { return g.Group == a.First })
	if i < 0 || len(added)-i < len(a.Voters) {
		return nil, false
	}
	for j, vs := range a.Voters {
		if !slices.Equal(added[i+j].Voters, vs) {
			return nil, false
		}
	}
	return slices.Clone(added[i : i+len(a.Voters)]), true
}

// checkVoters refuses a new group's voters that are none, repeat a node,
// or name one that is not a member.
func checkVoters(vs []uint64, members []Member) error {
	if len(vs) == 0 {
		return refuse.Invalidf("voters", "a new group needs at least one voter")
	}
	for i, id := range vs {
		if slices.Contains(vs[:i], id) {
			return refuse.Invalidf("voters", fmt.Sprintf("node %d is named twice", id))
		}
		if !slices.ContainsFunc(members, func(m Member) bool { return m.ID == id }) {
			return refuse.Invalidf("voters", fmt.Sprintf("node %d is not a member", id))
		}
	}
	return nil
}

// DataGroups is the cluster's data groups as this replica has applied the
// meta group: the bootstrap's and the added ones. Their ids run from
// MetaGroup+1 to MetaGroup+DataGroups().
func (m *metaSM) DataGroups() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg.Groups + len(m.added)
}

// AddedGroups are the data groups added after the bootstrap, as this
// replica has applied the meta group, in order.
func (m *metaSM) AddedGroups() []AddedGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.added)
}

// writeAdded writes the added groups into b when they changed.
func writeAdded(b *pebble.Batch, old, added []AddedGroup) error {
	if len(old) == len(added) {
		return nil // groups are only ever appended
	}
	return setJSON(b, gkey(node.MetaGroup, kindGroups), added)
}

// loadAdded reads the added groups.
func (m *metaSM) loadAdded() ([]AddedGroup, error) {
	var added []AddedGroup
	_, err := m.get(gkey(node.MetaGroup, kindGroups), &added)
	return added, err
}

// SessionSize is a session's log's length in a group.
type SessionSize struct {
	Name  string `json:"name"` // tenant/session
	Bytes int64  `json:"bytes"`
}

// GroupSessions is the sessions this replica holds for group, with their
// logs' sizes on disk (a stat each: no log is opened), the largest first.
func (m *dataSM) GroupSessions(group uint64) ([]SessionSize, error) {
	sessions, err := m.heldSessions(group)
	if err != nil {
		return nil, err
	}
	out := make([]SessionSize, 0, len(sessions))
	for _, se := range sessions {
		dir, err := store.SessionDir(m.cfg.Root, se.Tenant, se.Name)
		if err != nil {
			continue
		}
		fi, err := os.Stat(store.LogPath(dir))
		if err != nil || fi.Size() == 0 {
			continue // no log yet, or removed meanwhile
		}
		out = append(out, SessionSize{Name: se.String(), Bytes: fi.Size()})
	}
	slices.SortFunc(out, func(a, b SessionSize) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}
