package replica

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"tally/cluster/node"
	"tally/refuse"
	"tally/rest"
)

// testGroups is the data groups of the placement tests' replicas: 2 to 5.
const testGroups = 4

func openPlaced(t *testing.T, dir string) *SM {
	t.Helper()
	sm, db := openReplicaWith(t, dir, "", func(c *Config) { c.Groups = testGroups })
	t.Cleanup(func() { sm.Close(); db.Close() })
	return sm
}

// elsewhere is a data group other than the session's hash's.
func elsewhere(session string) uint64 {
	g := GroupOf(testGroups, "acme", session)
	if g == node.MetaGroup+testGroups {
		return g - 1
	}
	return g + 1
}

func fenceEntry(t *testing.T, index uint64, session string, group uint64) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(FenceDoc{Group: group})
	b, err := Command{Method: MethodFence, Tenant: "acme", Session: session, TS: int64(index) * 1e9, Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: b}
}

// apply applies entries to group and returns each one's outcome.
func apply(t *testing.T, sm *SM, group uint64, ents ...node.Entry) []Outcome {
	t.Helper()
	if _, err := sm.Apply(group, ents); err != nil {
		t.Fatalf("apply group %d: %v", group, err)
	}
	outs := make([]Outcome, len(ents))
	for i, e := range ents {
		outs[i], _ = sm.Take(group, e.Index)
	}
	return outs
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// The directory's rule: a data group of the cluster, well-formed names,
// a placement recorded once and final; a session placed in its hash's
// group needs no record.
func TestDecidePlacement(t *testing.T) {
	hash := GroupOf(testGroups, "acme", "s")
	other := elsewhere("s")
	placed := NewDirectory([]DirEntry{{Name: "acme/s", Group: other, Epoch: 1}})
	for _, c := range []struct {
		name   string
		have   *Directory
		p      *Placement
		err    string
		record bool
	}{
		{"no placement", nil, nil, "placement: required: tenant, session and group", false},
		{"bad tenant", nil, &Placement{Tenant: "ac me", Session: "s", Group: other}, `tenant: "ac me" must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`, false},
		{"no session", nil, &Placement{Tenant: "acme", Group: other}, `session: "" must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit`, false},
		{"the meta group", nil, &Placement{Tenant: "acme", Session: "s", Group: node.MetaGroup}, "group: 1 is not a data group of this cluster: its data groups are 2 to 5", false},
		{"past the last group", nil, &Placement{Tenant: "acme", Session: "s", Group: 6}, "group: 6 is not a data group of this cluster: its data groups are 2 to 5", false},
		{"no group", nil, &Placement{Tenant: "acme", Session: "s"}, "group: 0 is not a data group of this cluster: its data groups are 2 to 5", false},
		{"recorded", nil, &Placement{Tenant: "acme", Session: "s", Group: other}, "", true},
		{"again", placed, &Placement{Tenant: "acme", Session: "s", Group: other}, "", true},
		{"elsewhere once placed", placed, &Placement{Tenant: "acme", Session: "s", Group: hash}, "group: session acme/s is placed in group " + itoa(other) + "; moving a session is not supported yet", true},
		{"its hash's group", nil, &Placement{Tenant: "acme", Session: "s", Group: hash}, "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, out := decidePlacementIn(c.have, testGroups, testGroups, c.p)
			if errString(out.Err) != c.err {
				t.Fatalf("refusal %q, want %q", errString(out.Err), c.err)
			}
			if c.err != "" && got != c.have {
				t.Fatalf("a refusal changed the directory: %v", got.Ranges())
			}
			if g, ok := got.Group("acme/s"); ok != c.record || (ok && g != other) || (ok && got.Epoch("acme/s") != 1) {
				t.Fatalf("directory %+v, want a record: %v", got.From("", 10), c.record)
			}
		})
	}
	// Pure: the directory it was given is never changed.
	have := NewDirectory([]DirEntry{{Name: "acme/r", Group: other}})
	decidePlacementIn(have, testGroups, testGroups, &Placement{Tenant: "acme", Session: "s", Group: other})
	if have.Len() != 1 || have.Placed() != 1 {
		t.Fatalf("decidePlacementIn changed its input: %+v", have.From("", 10))
	}
}

// install installs from's snapshot of group on to.
func install(t *testing.T, from, to *SM, group uint64) {
	t.Helper()
	idx, man, err := from.Snapshot(group)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := from.WriteSnapshot(group, man, &body); err != nil {
		t.Fatal(err)
	}
	if err := to.Restore(group, idx, man, &body); err != nil {
		t.Fatal(err)
	}
}

func itoa(g uint64) string { b, _ := json.Marshal(g); return string(b) }

// A fence is refused for a session with records in its group; otherwise
// the group refuses the session's every later command (Moved), a fence
// again answers as the first, and a fence for another group, or in a group
// that is not the session's hash's, is refused.
func TestFence(t *testing.T) {
	sm := openPlaced(t, t.TempDir())
	g0, to := GroupOf(testGroups, "acme", "busy"), elsewhere("busy")
	outs := apply(t, sm, g0, entryIn(t, "busy", 1, "a"), entryIn(t, "busy", 2, "b"), fenceEntry(t, 3, "busy", to))
	want := "session: session acme/busy already has 2 records in group " + itoa(g0) + "; moving a session is not supported yet"
	if errString(outs[2].Err) != want {
		t.Fatalf("fence of a session with records: %q, want %q", errString(outs[2].Err), want)
	}
	if r, ok := refuse.As(outs[2].Err); !ok || r.Code != refuse.Conflict {
		t.Fatalf("the refusal is %v, want a conflict", outs[2].Err)
	}
	if _, fenced := sm.FencedTo(g0, "acme", "busy"); fenced {
		t.Fatal("a refused fence fenced the session")
	}

	g0, to = GroupOf(testGroups, "acme", "new"), elsewhere("new")
	other := to + 1
	if other > node.MetaGroup+testGroups {
		other = node.MetaGroup + 1
	}
	if other == g0 {
		other++
	}
	outs = apply(t, sm, g0,
		fenceEntry(t, 4, "new", to),
		entryIn(t, "new", 5, "after the fence"),
		fenceEntry(t, 6, "new", to),
		fenceEntry(t, 7, "new", other),
	)
	if outs[0].Err != nil {
		t.Fatalf("fence: %v", outs[0].Err)
	}
	var mv *Moved
	if !errors.As(outs[1].Err, &mv) || mv.From != g0 || mv.Group != to || mv.Session != "acme/new" {
		t.Fatalf("a command after the fence: %v", outs[1].Err)
	}
	wantMoved := "session acme/new is placed in group " + itoa(to) + "; group " + itoa(g0) + " no longer takes its commands: retry"
	if outs[1].Err.Error() != wantMoved {
		t.Fatalf("moved: %q, want %q", outs[1].Err, wantMoved)
	}
	if ref := rest.Refuse(outs[1].Err); ref.Status != 503 || ref.Code != CodeMoved || !bytes.Contains(ref.Document, []byte(`"group":`+itoa(to))) {
		t.Fatalf("moved as a binding answers it: %d %s %s", ref.Status, ref.Code, ref.Document)
	}
	if outs[2].Err != nil {
		t.Fatalf("the same fence again: %v", outs[2].Err)
	}
	wantOther := "group: session acme/new is fenced in group " + itoa(g0) + " for its placement in group " + itoa(to) + ": complete that one (tally cluster place acme/new --group " + itoa(to) + ")"
	if errString(outs[3].Err) != wantOther {
		t.Fatalf("a fence for another group: %q, want %q", errString(outs[3].Err), wantOther)
	}
	if _, err := sm.Open(t.Context(), "acme", "new", false); err == nil {
		t.Fatal("a refused command created the session")
	}

	// In a group that is not its hash's, a session is placed: it does not
	// move yet.
	outs = apply(t, sm, to, fenceEntry(t, 8, "new", other))
	wantPlaced := "session: session acme/new is placed in group " + itoa(to) + "; moving a session is not supported yet"
	if errString(outs[0].Err) != wantPlaced {
		t.Fatalf("a fence outside the hash's group: %q, want %q", errString(outs[0].Err), wantPlaced)
	}
}

// A replica may apply the placed group's first write of a session before
// its hash's group's fence (groups apply at their own pace): the fence is
// still taken there, as on a replica that applied them the other way
// round, since the records are the other group's.
func TestFenceAfterThePlacedGroupWrote(t *testing.T) {
	sm := openPlaced(t, t.TempDir())
	g0, to := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	if outs := apply(t, sm, to, entryIn(t, "s", 1, "placed")); outs[0].Err != nil {
		t.Fatal(outs[0].Err)
	}
	if h := sm.Holder("acme", "s"); h != to {
		t.Fatalf("held by %d, want %d", h, to)
	}
	if outs := apply(t, sm, g0, fenceEntry(t, 1, "s", to)); outs[0].Err != nil {
		t.Fatalf("fence after the placed group wrote: %v", outs[0].Err)
	}
}

// Fences and the directory survive a restart and travel in their groups'
// snapshots: a replica that installs them refuses and routes the same.
func TestPlacementSurvivesRestartAndSnapshot(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplicaWith(t, dir, "", func(c *Config) { c.Groups = testGroups })
	g0, to := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	apply(t, sm, g0, fenceEntry(t, 1, "s", to))
	set := apply(t, sm, node.MetaGroup, metaEntry(t, 1, MetaCommand{Op: OpPlacementSet, Placement: &Placement{Tenant: "acme", Session: "s", Group: to}}))
	if set[0].Err != nil {
		t.Fatal(set[0].Err)
	}
	if g := sm.GroupOf("acme", "s"); g != to {
		t.Fatalf("routed to %d, want %d", g, to)
	}
	sm.Close()
	db.Close()

	sm = openPlaced(t, dir)
	check := func(sm *SM, index uint64) {
		t.Helper()
		if g := sm.GroupOf("acme", "s"); g != to {
			t.Fatalf("routed to %d, want %d", g, to)
		}
		if ps := sm.Placements(); len(ps) != 1 || ps[0] != (Placement{Tenant: "acme", Session: "s", Group: to}) {
			t.Fatalf("placements %+v", ps)
		}
		if g, ok := sm.FencedTo(g0, "acme", "s"); !ok || g != to {
			t.Fatalf("fenced to %d %v", g, ok)
		}
		var mv *Moved
		if outs := apply(t, sm, g0, entryIn(t, "s", index, "x")); !errors.As(outs[0].Err, &mv) {
			t.Fatalf("a command in the fenced group: %v", outs[0].Err)
		}
	}
	check(sm, 2)

	other := openPlaced(t, filepath.Join(dir, "other"))
	install(t, sm, other, node.MetaGroup)
	install(t, sm, other, g0)
	check(other, 3)
	// An empty snapshot (a group's initial state) lifts the fence: it is
	// the group's state, nothing else's.
	if err := other.Restore(g0, 1, node.Manifest{}, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.FencedTo(g0, "acme", "s"); ok {
		t.Fatal("a fence outlived its group's new state")
	}
}

// Which sessions a group's snapshot holds, and which an install replaces,
// follow the held records, not the directory: a session written by the
// group it is placed in is that group's on a replica that has not applied
// the placement, and after a restart, and on a replica that installed it.
func TestHeldRecordsFilterSnapshots(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplicaWith(t, dir, "", func(c *Config) { c.Groups = testGroups })
	g0, to := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	if outs := apply(t, sm, to, entryIn(t, "s", 1, "placed")); outs[0].Err != nil {
		t.Fatal(outs[0].Err)
	}
	gh := GroupOf(testGroups, "acme", "here")
	if outs := apply(t, sm, gh, entryIn(t, "here", 1, "hashed")); outs[0].Err != nil {
		t.Fatal(outs[0].Err)
	}
	names := func(sm *SM, g uint64) map[string]bool {
		t.Helper()
		out := map[string]bool{}
		for _, s := range snapshotSessions(t, sm, g) {
			out[s.Name] = true
		}
		return out
	}
	if !names(sm, gh)["acme/here"] {
		t.Fatalf("group %d's snapshot lacks acme/here: %v", gh, names(sm, gh))
	}
	if !names(sm, to)["acme/s"] || names(sm, g0)["acme/s"] {
		t.Fatalf("group %d's snapshot %v, group %d's %v: acme/s is group %d's", to, names(sm, to), g0, names(sm, g0), to)
	}
	sm.Close()
	db.Close()
	sm = openPlaced(t, dir)
	if h := sm.Holder("acme", "s"); h != to {
		t.Fatalf("after a restart held by %d, want %d", h, to)
	}

	other := openPlaced(t, filepath.Join(dir, "other"))
	install(t, sm, other, to)
	if h := other.Holder("acme", "s"); h != to {
		t.Fatalf("installed, held by %d, want %d", h, to)
	}
	// Installing the hash's group's state leaves the session alone.
	if err := other.Restore(g0, 1, node.Manifest{}, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(t.Context(), "acme", "s", false); err != nil {
		t.Fatalf("installing group %d removed group %d's session: %v", g0, to, err)
	}
	if names(other, g0)["acme/s"] || !names(other, to)["acme/s"] {
		t.Fatal("the installed session is listed in the wrong group")
	}
}
