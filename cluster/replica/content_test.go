package replica

import (
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/digest"
)

// A group's content records (bytes beside the log: their size and
// holders) travel in its snapshot's head and are listed by Contents; the
// bytes themselves do not travel in it: the node installing it fetches
// them.
func TestContentRecordsTravelInTheSnapshotNotTheBytes(t *testing.T) {
	group := node.MetaGroup + 1
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	applyAll(t, sm, []node.Entry{{Index: 2, Kind: node.KindConf}, receiptEntry(t, 3, digest.HashContent(nil).String(), 1, 2)})
	content := digest.HashContent([]byte("patch beside the log")).String()
	err := sm.dataSM.commit(func(b *pebble.Batch) error {
		return setJSON(b, contentKey(group, content), contentRecord{Size: 20, Holders: []uint64{2}})
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	_, man, err := sm.Snapshot(group)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Entries {
		if e.Kind == kindObject {
			t.Fatalf("the snapshot carries object %s", e.Name)
		}
	}
	dst := restoredCopy(t, sm, 3)
	size, holders, known, err := dst.ContentHolders(group, content)
	if err != nil || !known || size != 20 || !slices.Equal(holders, []uint64{2}) {
		t.Fatalf("the restored record: %d %v %v %v", size, holders, known, err)
	}
	if got, err := dst.Contents(group); err != nil || !slices.Equal(got, []string{content}) {
		t.Fatalf("contents restored: %v %v", got, err)
	}
}
