package replica

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"tally/cluster/node"
	"tally/cluster/placement"
)

// The replication factor is the meta group's: configure refuses an even,
// zero or negative factor with nothing changed, records an odd one, and the
// factor survives a restart and travels in the snapshot.
func TestMetaConfigure(t *testing.T) {
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	if got := sm.Policy(); got.Replicas != 0 {
		t.Fatalf("a new meta group's factor is %d, want 0 (every member)", got.Replicas)
	}
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpConfigure, Replicas: 2}),
		metaEntry(t, 2, MetaCommand{Op: OpConfigure, Replicas: 0}),
		metaEntry(t, 3, MetaCommand{Op: OpConfigure, Replicas: 3}),
		metaEntry(t, 4, MetaCommand{Op: OpConfigure, Replicas: -1}),
		metaEntry(t, 5, MetaCommand{Op: OpConfigure, Replicas: 5}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"replicas: 2 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
		"replicas: 0 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
		"replicas 3 (was every member)",
		"replicas: -1 is not an odd number of at least 1 (1, 3, 5, …): an even count of voters survives no more failures than one fewer",
		"replicas 5 (was 3)",
	}
	for i, e := range ents {
		out, _ := sm.Take(node.MetaGroup, e.Index)
		got := ""
		if out.Err != nil {
			got = out.Err.Error()
		} else if c, ok := out.Value.(Configured); ok {
			got = c.String()
		}
		if got != want[i] {
			t.Errorf("entry %d:\n got  %s\n want %s", e.Index, got, want[i])
		}
	}
	if got := sm.Policy().Replicas; got != 5 {
		t.Fatalf("factor %d, want 5", got)
	}
	other := metaCopy(t, sm, filepath.Join(dir, "other"))
	if got := other.Policy().Replicas; got != 5 {
		t.Fatalf("restored factor %d, want 5", got)
	}
	if err := sm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again, _ := openReplica(t, dir, "")
	if got := again.Policy().Replicas; got != 5 {
		t.Fatalf("factor after a restart %d, want 5", got)
	}
}

// metaCopy is a new replica in dir that installed sm's meta snapshot.
func metaCopy(t *testing.T, sm *SM, dir string) *SM {
	t.Helper()
	idx, man, err := sm.Snapshot(node.MetaGroup)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := sm.WriteSnapshot(node.MetaGroup, man, &body); err != nil {
		t.Fatal(err)
	}
	other, _ := openReplica(t, dir, "")
	if err := other.Restore(node.MetaGroup, idx, man, &body); err != nil {
		t.Fatal(err)
	}
	return other
}

// A replace decision names the voter it removes, another node than the
// one it promotes; no other change names one. A refused one records
// nothing; an accepted one is in flight.
func TestMetaDecideReplace(t *testing.T) {
	sm, _ := openReplica(t, t.TempDir(), "")
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Replace, Node: 4}}),
		metaEntry(t, 2, MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Replace, Node: 4, Replaces: 4}}),
		metaEntry(t, 3, MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Promote, Node: 4, Replaces: 3}}),
		metaEntry(t, 4, MetaCommand{Op: OpDecide, Decision: &Decision{Group: 2, Op: placement.Replace, Node: 4, Replaces: 3}}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	refusal := "decision.replaces: a replace names the voter it removes, another node than the one it promotes; no other change names one"
	want := []string{refusal, refusal, refusal, "1 replace 4 out 3 in-flight"}
	for i, e := range ents {
		out, _ := sm.Take(node.MetaGroup, e.Index)
		got := ""
		if out.Err != nil {
			got = out.Err.Error()
		} else if d, ok := out.Value.(Decision); ok {
			got = fmt.Sprintf("%d %s %d out %d %s", d.ID, d.Op, d.Node, d.Replaces, d.State)
		}
		if got != want[i] {
			t.Errorf("entry %d:\n got  %s\n want %s", e.Index, got, want[i])
		}
	}
	if ds := sm.Policy().Decisions; len(ds) != 1 {
		t.Fatalf("decisions recorded: %+v, want the one replace", ds)
	}
}
