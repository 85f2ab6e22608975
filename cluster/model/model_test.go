package model

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/cockroachdb/pebble/v2/vfs"

	"tally/cluster/node"
	"tally/cluster/raftlog"
)

var _ = flag.Uint64("seed", 0, "simulator seed (used by cluster/sim)")

func open(t *testing.T) (*raftlog.DB, *SM) {
	t.Helper()
	db, err := raftlog.Open("/m", raftlog.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, New(db)
}

func cmd(session string, client, req uint64, v string) []byte {
	b, _ := json.Marshal(Command{Session: session, Client: client, Req: req, Value: v})
	return b
}

func TestApplyChainsDedupsAndRefuses(t *testing.T) {
	_, sm := open(t)
	res, err := sm.Apply(2, []node.Entry{
		{Index: 1, Kind: node.KindEmpty},
		{Index: 2, Kind: node.KindCommand, Data: cmd("a", 1, 1, "x")},
		{Index: 3, Kind: node.KindCommand, Data: cmd("a", 2, 1, "y")},
		{Index: 4, Kind: node.KindCommand, Data: cmd("a", 1, 1, "x")}, // retry
		{Index: 5, Kind: node.KindCommand, Data: []byte("{")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var r [5]Result
	for i := 1; i < 5; i++ {
		json.Unmarshal(res[i], &r[i])
	}
	if r[1].Seq != 1 || r[2].Seq != 2 || !r[3].Dup || r[3].Seq != 1 || r[4].Err == "" {
		t.Fatalf("results %+v", r)
	}
	recs, _ := sm.Log(2, "a")
	if len(recs) != 2 || !bytes.Equal(recs[1].Hash, ChainHash(recs[0].Hash, 2, "y")) {
		t.Fatalf("log %+v", recs)
	}
	if a, _ := sm.Applied(2); a != 5 {
		t.Fatalf("applied %d", a)
	}
	if _, err := sm.Apply(2, []node.Entry{{Index: 5, Kind: node.KindEmpty}}); err == nil {
		t.Fatal("an index already applied was accepted")
	}
}

// A snapshot's manifest is taken at the applied index and its body
// written after more appends: the body holds the records as of the
// manifest, and a restore gives that state, dedup records included.
func TestSnapshotRestore(t *testing.T) {
	_, a := open(t)
	_, b := open(t)
	a.Apply(3, []node.Entry{{Index: 7, Kind: node.KindCommand, Data: cmd("s", 1, 1, "v1")}, {Index: 8, Kind: node.KindCommand, Data: cmd("s", 1, 2, "v2")}})
	b.Apply(3, []node.Entry{{Index: 1, Kind: node.KindCommand, Data: cmd("old", 9, 1, "stale")}})
	idx, man, err := a.Snapshot(3)
	if err != nil || idx != 8 || len(man.Entries) != 1 {
		t.Fatalf("snapshot: %d %+v %v", idx, man, err)
	}
	a.Apply(3, []node.Entry{{Index: 9, Kind: node.KindCommand, Data: cmd("s", 1, 3, "v3")}})
	var buf bytes.Buffer
	if err := a.WriteSnapshot(3, man, &buf); err != nil {
		t.Fatal(err)
	}
	if uint64(buf.Len()) != man.BodySize() {
		t.Fatalf("body of %d bytes, manifest says %d", buf.Len(), man.BodySize())
	}
	if err := b.Restore(3, idx, man, &buf); err != nil {
		t.Fatal(err)
	}
	ra, _ := a.Log(3, "s")
	rb, _ := b.Log(3, "s")
	old, _ := b.Log(3, "old")
	if len(rb) != 2 || !bytes.Equal(ra[1].Hash, rb[1].Hash) || len(old) != 0 {
		t.Fatalf("restored %+v, stale %+v", rb, old)
	}
	if ap, _ := b.Applied(3); ap != 8 {
		t.Fatalf("applied after restore %d", ap)
	}
	// The restored replica goes on as the source did: the same third
	// record, and the source's retry of request 2 answered from the record.
	res, err := b.Apply(3, []node.Entry{{Index: 9, Kind: node.KindCommand, Data: cmd("s", 1, 3, "v3")}, {Index: 10, Kind: node.KindCommand, Data: cmd("s", 1, 3, "v3")}})
	var dup Result
	json.Unmarshal(res[1], &dup)
	if rb, _ = b.Log(3, "s"); err != nil || len(rb) != 3 || !bytes.Equal(rb[2].Hash, ra[2].Hash) || !dup.Dup {
		t.Fatalf("after the restore: %+v %+v %v", rb, dup, err)
	}
	if err := b.Restore(3, 11, man, bytes.NewReader([]byte{0xff, 0xff, 0xff})); err == nil {
		t.Fatal("a corrupt snapshot body was accepted")
	}
	long := node.Manifest{Entries: []node.ManifestEntry{{Kind: kindLog, Name: "s", Length: man.BodySize() + 1000}}}
	if err := a.WriteSnapshot(3, long, io.Discard); err == nil {
		t.Fatal("a manifest longer than the log was written")
	}
}

// The ledger model accepts a history where every write takes the next
// record's place and reads see exactly what was linearized before them,
// and refuses a read that misses an acknowledged write, a sequence that
// skips, and a resolution of what was never declared.
func TestLedgerModel(t *testing.T) {
	op := func(client int, call, ret int64, in LedgerOp, out LedgerOut) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	declare := LedgerOp{Kind: Declare, Session: "s", Text: "a"}
	resolve := LedgerOp{Kind: Resolve, Session: "s", Text: "a"}
	list := LedgerOp{Kind: List, Session: "s"}
	owed := LedgerOut{Promises: []Promise{{Text: "a", Seq: 1}}}
	done := LedgerOut{Promises: []Promise{{Text: "a", Seq: 1, Resolved: true}}}
	cases := []struct {
		name    string
		history []porcupine.Operation
		ok      bool
	}{
		{"in order", []porcupine.Operation{
			op(0, 0, 1, declare, LedgerOut{Seq: 1}), op(1, 2, 3, list, owed),
			op(0, 4, 5, resolve, LedgerOut{Seq: 3}), op(1, 6, 7, list, done),
		}, true},
		{"a read overlapping a write sees it or not", []porcupine.Operation{
			op(0, 0, 5, declare, LedgerOut{Seq: 1}), op(1, 1, 2, list, LedgerOut{}), op(2, 3, 4, list, owed),
		}, true},
		{"a read after the acknowledgment misses it", []porcupine.Operation{
			op(0, 0, 1, declare, LedgerOut{Seq: 1}), op(1, 2, 3, list, LedgerOut{}),
		}, false},
		{"a second write placed on the first one's request record", []porcupine.Operation{
			op(0, 0, 1, declare, LedgerOut{Seq: 1}), op(0, 2, 3, resolve, LedgerOut{Seq: 2}),
		}, false},
		{"a resolution of nothing declared", []porcupine.Operation{
			op(0, 0, 1, resolve, LedgerOut{Seq: 1}),
		}, false},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperations(Ledger, c.history); got != c.ok {
			t.Errorf("%s: linearizable %v, want %v", c.name, got, c.ok)
		}
	}
}
