package replica

import (
	"fmt"
	"path/filepath"
	"testing"

	"tally/cluster/node"
	"tally/cluster/placement"
)

// sameGroup is a session of acme in the same group (of 4) as acme/s.
func sameGroup(t *testing.T, s string) string {
	t.Helper()
	for i := range 1000 {
		o := fmt.Sprintf("t%d", i)
		if GroupOf(4, "acme", o) == GroupOf(4, "acme", s) {
			return o
		}
	}
	t.Fatal("no session shares a group")
	return ""
}

// The meta group records a constraint only when live members can meet
// it and it does not conflict with another in a group it binds; each
// refusal says why and changes nothing.
func TestDecideConstrain(t *testing.T) {
	zones := "aabcc"
	st := metaState{Policy: Policy{Replicas: 3}}
	for i, z := range zones {
		st.Members = append(st.Members, Member{ID: uint64(i + 1), Zone: string(z)})
	}
	st.Liveness = []LivenessFact{{Node: 3, State: LivenessDead}} // zone b's only node
	other := sameGroup(t, "s1")
	g := GroupOf(4, "acme", "s1")
	zc := func(tenant, session string, zs ...string) *ConstraintEntry {
		return &ConstraintEntry{Tenant: tenant, Session: session, Constraint: placement.Constraint{Zones: zs}}
	}
	for _, tc := range []struct {
		e    *ConstraintEntry
		want string
	}{
		{nil, "constraint: required: a tenant, or a tenant and session, with regions or zones"},
		{zc("acme", "s1"), "regions: required: --regions R1,R2 or --zones Z1,Z2 (or --clear)"},
		{&ConstraintEntry{Tenant: "acme", Constraint: placement.Constraint{Zones: []string{"a"}, Regions: []string{"eu"}}}, "zones: given with regions: constrain by one of them"},
		{zc("acme", "s1", "x"), `zones: zones: no member is in zone "x" (the members' zones: a, b, c)`},
		{zc("acme", "s1", "a", "b"), `zones: zones: zone "b" has no live member that is not draining: the constraint cannot be met`},
		{zc("acme", "s1", "a"), "zones: only 2 live members that are not draining are inside the constraint (zones a), and a group's 3 voters must be: the constraint cannot be met"},
		{zc("acme", "s1", "a", "c"), "recorded session acme/s1 (zones a,c)"},
		{zc("acme", "s1", "a", "c"), "recorded session acme/s1 (zones a,c)"},
		{zc("acme", other, "c"), "zones: only 2 live members that are not draining are inside the constraint (zones c), and a group's 3 voters must be: the constraint cannot be met"},
		{&ConstraintEntry{Tenant: "acme", Session: other, Constraint: placement.Constraint{Zones: []string{"b", "c"}}}, `zones: zones: zone "b" has no live member that is not draining: the constraint cannot be met`},
		{&ConstraintEntry{Tenant: "acme", Session: "s1", Clear: true}, "recorded session acme/s1 (none)"},
		{&ConstraintEntry{Tenant: "acme", Session: "s1", Clear: true}, "recorded session acme/s1 (none)"},
	} {
		before := len(st.Policy.Constraints)
		next, out := decideMeta(st, MetaCommand{Op: OpConstrain, Constraint: tc.e}, 4)
		got := ""
		if out.Err != nil {
			got = out.Err.Error()
			if len(next.Policy.Constraints) != before {
				t.Errorf("refused %q and changed the constraints", got)
			}
		} else {
			e := out.Value.(ConstraintEntry)
			got = fmt.Sprintf("recorded %s (%s)", e.Of(), e.Constraint)
		}
		if got != tc.want {
			t.Errorf("constrain %+v:\n got  %s\n want %s", tc.e, got, tc.want)
		}
		st = next
	}

	// Two sessions in one group: a constraint with nothing in common with
	// the other's is refused, naming it and the way out.
	st.Liveness = nil
	st.Members = append(st.Members, Member{ID: 6, Zone: "c"})
	st, out := decideMeta(st, MetaCommand{Op: OpConstrain, Constraint: zc("acme", "s1", "a", "b")}, 4)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	_, out = decideMeta(st, MetaCommand{Op: OpConstrain, Constraint: zc("acme", other, "c")}, 4)
	want := fmt.Sprintf("zones: conflicts with session acme/s1's constraint (zones a,b) in group %d: no region or zone is in both (zones c) and (zones a,b); tally cluster move moves a session to another group", g)
	if out.Err == nil || out.Err.Error() != want {
		t.Errorf("conflict:\n got  %v\n want %s", out.Err, want)
	}
	// The tenant's constraint binds its session's group too.
	_, out = decideMeta(st, MetaCommand{Op: OpConstrain, Constraint: zc("acme", "", "c")}, 4)
	if want := fmt.Sprintf("zones: conflicts with session acme/s1's constraint (zones a,b) in group %d: no region or zone is in both (zones c) and (zones a,b); tally cluster move moves a session to another group", g); out.Err == nil || out.Err.Error() != want {
		t.Errorf("tenant conflict:\n got  %v\n want %s", out.Err, want)
	}
	st, out = decideMeta(st, MetaCommand{Op: OpConstrain, Constraint: zc("acme", "", "a", "b", "c")}, 4)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	bound := ConstraintGroups(st.Policy.Constraints, nil, func(t, s string) uint64 { return GroupOf(4, t, s) })
	if got := GroupConstraints(bound)[g].String(); got != "zones a,b" {
		t.Errorf("group %d's effective constraint %s, want zones a,b", g, got)
	}
}

// Constraints survive a restart and travel in the snapshot.
func TestMetaConstraintsApplied(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpMemberAdd, Member: &Member{ID: 1, RaftAddr: "127.0.0.1:1", Addr: "127.0.0.1:2", Zone: "a"}}),
		metaEntry(t, 2, MetaCommand{Op: OpConfigure, Replicas: 1}),
		metaEntry(t, 3, MetaCommand{Op: OpConstrain, Constraint: &ConstraintEntry{Tenant: "acme", Session: "s1", Constraint: placement.Constraint{Zones: []string{"a"}}}}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	if out, _ := sm.Take(node.MetaGroup, 3); out.Err != nil {
		t.Fatal(out.Err)
	}
	other := metaCopy(t, sm, filepath.Join(dir, "other"))
	bound, groups := other.Constraints()
	if len(bound) != 1 || bound[0].Entry.Name() != "acme/s1" || groups[other.GroupOf("acme", "s1")].String() != "zones a" {
		t.Errorf("restored constraints %+v, %v", bound, groups)
	}
}
