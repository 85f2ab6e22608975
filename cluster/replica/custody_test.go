package replica

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"tally/cluster/node"
	"tally/digest"
	"tally/refuse"
)

func receiptEntry(t *testing.T, index uint64, content string, n, epoch uint64) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(ReceiptDoc{Content: content, Node: n, Epoch: epoch})
	data, err := Command{Method: MethodReceipt, TS: at(index), Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: data}
}

// A receipt counts at the epoch it was made at, only if that is the
// group's when it applies; it is kept across a snapshot, and after a
// placement change a receipt of the old epoch is refused.
func TestReceiptsAreBoundToThePlacementEpoch(t *testing.T) {
	group := node.MetaGroup + 1
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	content := digest.HashContent([]byte("patch")).String()
	outs := applyAll(t, sm, []node.Entry{{Index: 2, Kind: node.KindConf},
		receiptEntry(t, 3, content, 1, 2), receiptEntry(t, 4, content, 2, 0), receiptEntry(t, 5, "nope", 3, 2), receiptEntry(t, 6, content, 3, 2)})
	if outs[3].Err != nil || outs[6].Err != nil {
		t.Fatalf("receipts at the group's epoch: %v %v", outs[3].Err, outs[6].Err)
	}
	if r, ok := refuse.As(outs[4].Err); !ok || r.Code != refuse.Conflict || !strings.Contains(r.Rule, "a receipt made at placement epoch 0; the group's is 2") {
		t.Fatalf("a stale receipt: %v", outs[4].Err)
	}
	if r, ok := refuse.As(outs[5].Err); !ok || r.Code != refuse.Invalid {
		t.Fatalf("a receipt of no content: %v", outs[5].Err)
	}
	want := map[uint64]uint64{1: 2, 3: 2}
	if got, err := sm.Receipts(group, content); err != nil || !maps.Equal(got, want) {
		t.Fatalf("receipts %v %v, want %v", got, err, want)
	}
	if got, _ := restoredCopy(t, sm, 6).Receipts(group, content); !maps.Equal(got, want) {
		t.Fatalf("receipts restored from a snapshot: %v", got)
	}
	outs = applyAll(t, sm, []node.Entry{{Index: 7, Kind: node.KindConf}, receiptEntry(t, 8, content, 2, 2), receiptEntry(t, 9, content, 2, 7)})
	if outs[8].Err == nil || outs[9].Err != nil {
		t.Fatalf("after a change: an old epoch's %v, the new one's %v", outs[8].Err, outs[9].Err)
	}
	if got, _ := sm.Receipts(group, content); !maps.Equal(got, map[uint64]uint64{1: 2, 2: 7, 3: 2}) {
		t.Fatalf("receipts after the change: %v", got)
	}
}

// A receipt withdrawn (its node's copy found damaged) is gone, whatever
// the epoch it names, until the node receipts its repaired copy again.
func TestAWithdrawnReceiptIsGoneUntilMadeAgain(t *testing.T) {
	group := node.MetaGroup + 1
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	content := digest.HashContent([]byte("patch")).String()
	withdraw := func(index, n uint64) node.Entry {
		doc, _ := json.Marshal(ReceiptDoc{Content: content, Node: n, Epoch: 0, Withdrawn: true})
		data, err := Command{Method: MethodReceipt, TS: at(index), Doc: doc}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return node.Entry{Index: index, Kind: node.KindCommand, Data: data}
	}
	outs := applyAll(t, sm, []node.Entry{{Index: 2, Kind: node.KindConf},
		receiptEntry(t, 3, content, 1, 2), receiptEntry(t, 4, content, 2, 2), withdraw(5, 2)})
	if outs[5].Err != nil {
		t.Fatalf("a withdrawal: %v", outs[5].Err)
	}
	if got, _ := sm.Receipts(group, content); !maps.Equal(got, map[uint64]uint64{1: 2}) {
		t.Fatalf("receipts after a withdrawal: %v", got)
	}
	applyAll(t, sm, []node.Entry{receiptEntry(t, 6, content, 2, 2)})
	if got, _ := sm.Receipts(group, content); !maps.Equal(got, map[uint64]uint64{1: 2, 2: 2}) {
		t.Fatalf("receipts once made again: %v", got)
	}
}

// The custody policy is a named value in the meta group: all by default,
// majority once set; an unnamed one is refused naming the field, and
// changes nothing.
func TestCustodyPolicy(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	if got := sm.Policy().CustodyPolicy(); got != CustodyAll {
		t.Fatalf("the default: %q", got)
	}
	ents := []node.Entry{
		metaEntry(t, 1, MetaCommand{Op: OpCustody, Custody: "most"}),
		metaEntry(t, 2, MetaCommand{Op: OpCustody, Custody: CustodyMajority}),
		metaEntry(t, 3, MetaCommand{Op: OpCustody}),
	}
	if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
		t.Fatal(err)
	}
	outs := map[uint64]Outcome{}
	for _, e := range ents {
		outs[e.Index], _ = sm.Take(node.MetaGroup, e.Index)
	}
	if r, ok := refuse.As(outs[1].Err); !ok || r.Field != "custody" || r.Rule != `must be "all" or "majority", not "most"` {
		t.Fatalf("an unnamed policy: %v", outs[1].Err)
	}
	if v, ok := outs[2].Value.(CustodySet); outs[2].Err != nil || !ok || v != (CustodySet{Custody: CustodyMajority, Was: CustodyAll}) {
		t.Fatalf("majority set: %+v", outs[2])
	}
	if outs[3].Err == nil {
		t.Fatal("an empty policy was taken")
	}
	if got := sm.Policy().CustodyPolicy(); got != CustodyMajority {
		t.Fatalf("after the commands: %q", got)
	}
}

func TestCustodyWhole(t *testing.T) {
	for _, c := range []struct {
		policy          string
		voters, holders int
		required        int
		whole           bool
	}{
		{CustodyAll, 3, 3, 3, true},
		{CustodyAll, 3, 2, 3, false},
		{"", 3, 2, 3, false},
		{CustodyMajority, 3, 2, 2, true},
		{CustodyMajority, 3, 1, 2, false},
		{CustodyMajority, 4, 2, 3, false},
		{CustodyMajority, 5, 3, 3, true},
		{CustodyMajority, 1, 1, 1, true},
		{CustodyAll, 0, 0, 0, false},
	} {
		if got := CustodyRequired(c.policy, c.voters); got != c.required {
			t.Errorf("%q of %d: %d required, want %d", c.policy, c.voters, got, c.required)
		}
		if got := CustodyWhole(c.policy, c.voters, c.holders); got != c.whole {
			t.Errorf("%q, %d of %d: whole %v, want %v", c.policy, c.holders, c.voters, got, c.whole)
		}
	}
}
