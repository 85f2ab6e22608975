package replica

import (
	"testing"

	"tally/cluster/node"
)

func TestNextEpoch(t *testing.T) {
	for _, tc := range []struct {
		epoch uint64
		e     node.Entry
		want  uint64
	}{
		{0, node.Entry{Index: 1, Kind: node.KindEmpty}, 0},
		{0, node.Entry{Index: 4, Kind: node.KindConf}, 4},
		{4, node.Entry{Index: 5, Kind: node.KindCommand}, 4},
		{4, node.Entry{Index: 9, Kind: node.KindConf}, 9},
	} {
		if got := nextEpoch(tc.epoch, tc.e); got != tc.want {
			t.Errorf("nextEpoch(%d, %+v) = %d, want %d", tc.epoch, tc.e, got, tc.want)
		}
	}
}

// A data group's placement epoch is the index of the last configuration
// change it applied, kept with the applied index across a restart and in
// its snapshot; the meta group keeps its own.
func TestPlacementEpochIsTheLastConfChangeApplied(t *testing.T) {
	group := node.MetaGroup + 1
	dir := t.TempDir()
	sm, db := openReplica(t, dir, "")
	if got := sm.PlacementEpoch(group); got != 0 {
		t.Fatalf("before any change: %d", got)
	}
	if _, err := sm.Apply(group, []node.Entry{{Index: 1, Kind: node.KindEmpty}, {Index: 2, Kind: node.KindConf}, entry(t, 3, "a")}); err != nil {
		t.Fatal(err)
	}
	if got := sm.PlacementEpoch(group); got != 2 {
		t.Fatalf("after a change at 2: %d", got)
	}
	if _, err := sm.Apply(group, []node.Entry{entry(t, 4, "b"), {Index: 5, Kind: node.KindConf}, {Index: 6, Kind: node.KindEmpty}}); err != nil {
		t.Fatal(err)
	}
	if got := sm.PlacementEpoch(group); got != 5 {
		t.Fatalf("after a change at 5: %d", got)
	}
	if _, err := sm.Apply(node.MetaGroup, []node.Entry{{Index: 7, Kind: node.KindConf}}); err != nil {
		t.Fatal(err)
	}
	if got, data := sm.PlacementEpoch(node.MetaGroup), sm.PlacementEpoch(group); got != 7 || data != 5 {
		t.Fatalf("meta epoch %d, data epoch %d", got, data)
	}
	// A replica restored from the snapshot names the same epoch.
	if got := restoredCopy(t, sm, 6).PlacementEpoch(group); got != 5 {
		t.Fatalf("restored from a snapshot: %d", got)
	}
	sm.Close()
	db.Close()
	sm, db = openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	if got := sm.PlacementEpoch(group); got != 5 {
		t.Fatalf("after a restart: %d", got)
	}
}
