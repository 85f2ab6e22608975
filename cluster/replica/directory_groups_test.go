package replica

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"tally/cluster/node"
	"tally/refuse"
)

func TestDecideGroupsAdd(t *testing.T) {
	members := []Member{{ID: 1}, {ID: 2}, {ID: 3}}
	have := []AddedGroup{{Group: 10, Voters: []uint64{1, 2, 3}, Added: 5}}
	add := func(first uint64, voters ...[]uint64) MetaCommand {
		return MetaCommand{Op: OpGroupsAdd, GroupsAdd: &GroupsAdd{First: first, Voters: voters}, TS: 7}
	}
	many := make([][]uint64, GroupsAddMax+1)
	for i := range many {
		many[i] = []uint64{1}
	}
	cases := []struct {
		name  string
		added []AddedGroup
		hash  int
		c     MetaCommand
		want  string // the groups after, or the refusal
	}{
		{"first add", nil, 8, add(10, []uint64{1, 2, 3}), "[10:[1 2 3]]"},
		{"two more", have, 8, add(11, []uint64{1, 2}, []uint64{3}), "[10:[1 2 3] 11:[1 2] 12:[3]]"},
		{"the same request again", have, 8, add(10, []uint64{1, 2, 3}), "[10:[1 2 3]]"},
		{"decided at a count that grew", have, 8, add(10, []uint64{1}), "StaleGroups groups: asked to add groups from 10, but group 11 is the next: groups were added since; ask again"},
		{"from the future", nil, 8, add(12, []uint64{1}), "StaleGroups groups: asked to add groups from 12, but group 10 is the next: groups were added since; ask again"},
		{"none", nil, 8, add(10), "invalid count: 0: must be 1 to 64 groups at a time"},
		{"too many at once", nil, 8, add(10, many...), "invalid count: 65: must be 1 to 64 groups at a time"},
		{"past the bound", nil, MaxDataGroups, add(node.MetaGroup+1+MaxDataGroups, []uint64{1}), "invalid count: 1 more would make 1025 data groups, more than 1024"},
		{"no voter", nil, 8, add(10, []uint64{}), "invalid voters: a new group needs at least one voter"},
		{"a voter twice", nil, 8, add(10, []uint64{1, 1}), "invalid voters: node 1 is named twice"},
		{"a stranger", nil, 8, add(10, []uint64{1, 9}), "invalid voters: node 9 is not a member"},
		{"no document", nil, 8, MetaCommand{Op: OpGroupsAdd}, "invalid groups: required: the first group and each group's voters"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := metaState{Members: members, Added: tc.added}
			got, out := decideMeta(st, tc.c, tc.hash)
			s := fmt.Sprint(groupsString(got.Added))
			if out.Err != nil {
				r, _ := refuse.As(out.Err)
				s = string(r.Code) + " " + out.Err.Error()
				if len(got.Added) != len(tc.added) {
					t.Errorf("refused, yet the groups changed: %v", got.Added)
				}
			}
			if s != tc.want {
				t.Fatalf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func groupsString(gs []AddedGroup) string {
	s := "["
	for i, g := range gs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%d:%v", g.Group, g.Voters)
	}
	return s + "]"
}

// An added group counts among the data groups a placement and a move may
// name; it survives a restart and travels in the meta group's snapshot;
// a name's hash stays over the bootstrap's groups.
func TestAddedGroupsPersist(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	for i, c := range []MetaCommand{
		{Op: OpMemberAdd, Member: &Member{ID: 1, RaftAddr: "127.0.0.1:1", Addr: "127.0.0.1:2"}},
		{Op: OpGroupsAdd, GroupsAdd: &GroupsAdd{First: 3, Voters: [][]uint64{{1}}}, TS: 9},
		{Op: OpPlacementSet, Placement: &Placement{Tenant: "acme", Session: "s", Group: 3}},
	} {
		if _, err := sm.Apply(node.MetaGroup, []node.Entry{metaEntry(t, uint64(i+1), c)}); err != nil {
			t.Fatal(err)
		}
		if out, _ := sm.Take(node.MetaGroup, uint64(i+1)); out.Err != nil {
			t.Fatalf("%s: %v", c.Op, out.Err)
		}
	}
	check := func(what string, sm *SM) {
		t.Helper()
		if got := sm.DataGroups(); got != 2 {
			t.Errorf("%s: %d data groups, want 2", what, got)
		}
		if got := groupsString(sm.AddedGroups()); got != "[3:[1]]" {
			t.Errorf("%s: added %s", what, got)
		}
		if g := sm.metaSM.GroupOf("acme", "s"); g != 3 {
			t.Errorf("%s: acme/s in group %d, want its placement's 3", what, g)
		}
		if g := sm.metaSM.GroupOf("acme", "t"); g != 2 {
			t.Errorf("%s: acme/t in group %d, want its hash's 2", what, g)
		}
	}
	check("applied", sm)
	check("from its snapshot", metaCopy(t, sm, filepath.Join(dir, "copy")))
	if err := sm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := openReplica(t, dir, "")
	check("after a restart", again)
}

// A group's sessions, largest first, each its log's size.
func TestGroupSessions(t *testing.T) {
	sm, _ := openReplica(t, t.TempDir(), "")
	ents := []node.Entry{entryIn(t, "small", 1, "one"), entryIn(t, "big", 2, "one"), entryIn(t, "big", 3, "two")}
	if _, err := sm.Apply(2, ents); err != nil {
		t.Fatal(err)
	}
	got, err := sm.GroupSessions(2)
	if err != nil {
		t.Fatal(err)
	}
	want := []SessionSize{{Name: "acme/big", Bytes: int64(len(logBytes(t, sm, "big")))}, {Name: "acme/small", Bytes: int64(len(logBytes(t, sm, "small")))}}
	if fmt.Sprint(got) != fmt.Sprint(want) || want[0].Bytes <= want[1].Bytes {
		t.Fatalf("GroupSessions(2) = %v, want %v", got, want)
	}
	if other, err := sm.GroupSessions(3); err != nil || len(other) != 0 {
		t.Fatalf("GroupSessions(3) = %v, %v", other, err)
	}
}

func TestFileMentions(t *testing.T) {
	dir := t.TempDir()
	needle := []byte(`"claim.artifact`)
	for _, tc := range []struct {
		name string
		body []byte
		want bool
	}{
		{"absent", []byte(`{"type":"promise.declare"}` + "\n"), false},
		{"present", []byte(`{"type":"claim.artifact","content":"ab"}` + "\n"), true},
		{"across a step", append(bytes.Repeat([]byte{'x'}, 1<<20-5), needle...), true},
		{"empty", nil, false},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, tc.body, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := fileMentions(path, needle); err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}
