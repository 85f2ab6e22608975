package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/digest"
	"tally/rest"
	"tally/service"
	"tally/store"
)

func moveEntry(t *testing.T, index uint64, method, session string, d MoveDoc) node.Entry {
	t.Helper()
	doc, _ := json.Marshal(d)
	b, err := Command{Method: method, Tenant: "acme", Session: session, TS: int64(index) * 1e9, Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: b}
}

// openMoving opens a replica whose Fetch reads from the replica *src.
func openMoving(t *testing.T, src **SM) *SM {
	t.Helper()
	sm, db := openReplicaWith(t, t.TempDir(), "", func(c *Config) {
		c.Groups = testGroups
		c.Fetch = func(_ context.Context, group uint64, tenant, session string, from, to int64, w io.Writer) error {
			return (*src).ReadLog(group, tenant, session, from, to, w)
		}
	})
	t.Cleanup(func() { sm.Close(); db.Close() })
	return sm
}

func logBytes(t *testing.T, sm *SM, session string) []byte {
	t.Helper()
	dir, _ := store.SessionDir(sm.dataSM.cfg.Root, "acme", session)
	b, err := os.ReadFile(store.LogPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A move's commands on a node that holds the source group (a), one that
// holds the destination alone (b) and one that holds both (a again): the
// fence refuses writes with 503 Moving; the install on b completes its
// staged copy from a, on a takes the log as it is; both end at the fenced
// sequence and chain hash, and both write on in the destination the same
// bytes; a late source command on a is refused as moved; the retire keeps
// a's log, the destination's now.
func TestMoveCommands(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	b := openMoving(t, &a)
	src := GroupOf(testGroups, "acme", "s")
	dst := elsewhere("s")
	var idx uint64
	next := func() uint64 { idx++; return idx }
	for i := range 5 {
		if out := apply(t, a, src, entryIn(t, "s", next(), "p"+itoa(uint64(i)))); out[0].Err != nil {
			t.Fatal(out[0].Err)
		}
	}
	probe := apply(t, a, src, moveEntry(t, next(), MethodMoveProbe, "s", MoveDoc{Move: 1}))[0]
	end, _ := probe.Value.(LogEnd)
	if probe.Err != nil || end.Seq != 5 {
		t.Fatalf("probe: %+v", probe)
	}
	// b stages what the probe saw; a writes on meanwhile.
	if got, err := b.Stage(context.Background(), "acme", "s", src, end.Length); err != nil || got != end {
		t.Fatalf("stage: %+v %v", got, err)
	}
	apply(t, a, src, entryIn(t, "s", next(), "p5"), entryIn(t, "s", next(), "p6"))
	fence := apply(t, a, src, moveEntry(t, next(), MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}),
		entryIn(t, "s", next(), "refused"))
	fenced, _ := fence[0].Value.(LogEnd)
	if fence[0].Err != nil || fenced.Seq != 7 {
		t.Fatalf("fence: %+v", fence[0])
	}
	want := "session acme/s is moving from group " + itoa(src) + " to group " + itoa(dst) + ": its writes resume once the move is activated or aborted: retry"
	var ref rest.Refuser
	if errString(fence[1].Err) != want || !errors.As(fence[1].Err, &ref) || ref.Refusal().Code != service.CodeMoving || ref.Refusal().Status != 503 {
		t.Fatalf("a write after the fence: %v", fence[1].Err)
	}
	if _, ok := a.MovingTo(src, "acme", "s"); !ok {
		t.Fatal("not fenced for the move")
	}

	install := MoveDoc{Move: 1, From: src, To: dst, Seq: fenced.Seq, Chain: fenced.Chain, Length: fenced.Length}
	for _, sm := range []*SM{b, a} {
		out := apply(t, sm, dst, moveEntry(t, next(), MethodMoveInstall, "s", install))[0]
		if got, _ := out.Value.(LogEnd); out.Err != nil || got != fenced {
			t.Fatalf("install: %+v", out)
		}
		if g := sm.Holder("acme", "s"); g != dst {
			t.Fatalf("held by group %d after the install", g)
		}
	}
	if !bytes.Equal(logBytes(t, a, "s"), logBytes(t, b, "s")) {
		t.Fatal("the copies differ")
	}
	// c holds both groups and applied the source's first five commands
	// only when it applies the install: it completes its log from a, and
	// refuses the source's commands it applies late (their lines are in
	// its log already); the fence it then applies answers as a's did.
	c := openMoving(t, &a)
	for i := range 5 {
		apply(t, c, src, entryIn(t, "s", uint64(i+1), "p"+itoa(uint64(i))))
	}
	if out := apply(t, c, dst, moveEntry(t, 1, MethodMoveInstall, "s", install))[0]; out.Err != nil {
		t.Fatalf("install on a node behind: %v", out.Err)
	}
	late := apply(t, c, src, entryIn(t, "s", 7, "p5"), entryIn(t, "s", 8, "p6"), moveEntry(t, 9, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))
	var mv *Moved
	if !errors.As(late[0].Err, &mv) || mv.Group != dst || !errors.As(late[1].Err, &mv) {
		t.Fatalf("late source commands: %v, %v", late[0].Err, late[1].Err)
	}
	if got, _ := late[2].Value.(LogEnd); late[2].Err != nil || got != fenced {
		t.Fatalf("a late fence: %+v", late[2])
	}
	if !bytes.Equal(logBytes(t, a, "s"), logBytes(t, c, "s")) {
		t.Fatal("the completed log differs")
	}
	w := next()
	for _, sm := range []*SM{a, b} {
		if out := apply(t, sm, dst, entryIn(t, "s", w, "in the destination"))[0]; out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	if !bytes.Equal(logBytes(t, a, "s"), logBytes(t, b, "s")) || strings.Count(string(logBytes(t, b, "s")), "\n") != 8 {
		t.Fatal("the destination's writes differ, or are not the eighth line")
	}
	retire := apply(t, a, src, moveEntry(t, next(), MethodMoveRetire, "s", MoveDoc{Move: 1, To: dst}),
		entryIn(t, "s", next(), "after the retire"))
	if retire[0].Err != nil || !errors.As(retire[1].Err, &mv) || mv.Group != dst {
		t.Fatalf("retire: %+v", retire)
	}
	if _, ok := a.MovingTo(src, "acme", "s"); ok || len(logBytes(t, a, "s")) == 0 {
		t.Fatal("retire on a node that holds both groups: still fenced for the move, or the log gone")
	}
	// The retire again (its first answer lost) answers as the first; a
	// retire naming another group is refused as moved.
	again := apply(t, a, src, moveEntry(t, next(), MethodMoveRetire, "s", MoveDoc{Move: 1, To: dst}),
		moveEntry(t, next(), MethodMoveRetire, "s", MoveDoc{Move: 1, To: dst + 1}))
	if again[0].Err != nil || !errors.As(again[1].Err, &mv) || mv.Group != dst {
		t.Fatalf("retire again: %+v", again)
	}
}

// An abort after the install: the destination's copy goes on a node that
// holds it alone; the source, unfenced, writes on. A copy that does not
// continue the chain is refused at the stage.
func TestMoveAbortAndABadCopy(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	b := openMoving(t, &a)
	src, dst := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	apply(t, a, src, entryIn(t, "s", 1, "p1"), entryIn(t, "s", 2, "p2"))
	fenced, _ := apply(t, a, src, moveEntry(t, 3, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))[0].Value.(LogEnd)
	out := apply(t, b, dst, moveEntry(t, 1, MethodMoveInstall, "s", MoveDoc{Move: 1, From: src, To: dst, Seq: fenced.Seq, Chain: fenced.Chain, Length: fenced.Length}))[0]
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if out := apply(t, b, dst, moveEntry(t, 2, MethodMoveDrop, "s", MoveDoc{Move: 1, From: src}))[0]; out.Err != nil {
		t.Fatal(out.Err)
	}
	dir, _ := store.SessionDir(b.dataSM.cfg.Root, "acme", "s")
	if store.HasLog(dir) || b.Holder("acme", "s") == dst {
		t.Fatal("the dropped copy is still there")
	}
	outs := apply(t, a, src, moveEntry(t, 4, MethodMoveUnfence, "s", MoveDoc{Move: 1}), entryIn(t, "s", 5, "p3"))
	if outs[0].Err != nil || outs[1].Err != nil {
		t.Fatalf("unfence and write: %+v", outs)
	}

	bad := openMoving(t, &a)
	bad.dataSM.cfg.Fetch = func(_ context.Context, group uint64, tenant, session string, from, to int64, w io.Writer) error {
		var buf bytes.Buffer
		if err := a.ReadLog(group, tenant, session, from, to, &buf); err != nil {
			return err
		}
		_, err := w.Write(bytes.Replace(buf.Bytes(), []byte("p2"), []byte("p9"), 1))
		return err
	}
	if _, err := bad.Stage(context.Background(), "acme", "s", src, fenced.Length); err == nil || !strings.Contains(err.Error(), "line 2: chain hash does not match the line and the line before it") {
		t.Fatalf("a tampered copy: %v", err)
	}
}

// An abort after the install on nodes that hold both groups: the source's
// unfence takes the log back on every node, whether its destination
// replica has applied the drop (c) or not yet (a) or has not even applied
// the install (d), so a write after the unfence is written alike on all
// three (simulator seed 1591: it was refused as moved where the drop had
// not been applied yet, and the logs diverged). A late install or fence
// of the ended move is refused and takes nothing.
func TestMoveUnfenceTakesTheLogBack(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	c, d := openMoving(t, &a), openMoving(t, &a)
	src, dst := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	var fenced LogEnd
	for _, sm := range []*SM{a, c, d} {
		apply(t, sm, src, entryIn(t, "s", 1, "p1"), entryIn(t, "s", 2, "p2"))
		fenced, _ = apply(t, sm, src, moveEntry(t, 3, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))[0].Value.(LogEnd)
	}
	install := MoveDoc{Move: 1, From: src, To: dst, Seq: fenced.Seq, Chain: fenced.Chain, Length: fenced.Length}
	for _, sm := range []*SM{a, c} {
		if out := apply(t, sm, dst, moveEntry(t, 1, MethodMoveInstall, "s", install))[0]; out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	if out := apply(t, c, dst, moveEntry(t, 2, MethodMoveDrop, "s", MoveDoc{Move: 1, From: src}))[0]; out.Err != nil {
		t.Fatal(out.Err)
	}
	for _, sm := range []*SM{a, c, d} {
		outs := apply(t, sm, src, moveEntry(t, 4, MethodMoveUnfence, "s", MoveDoc{Move: 1}), entryIn(t, "s", 5, "p3"),
			moveEntry(t, 6, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))
		if outs[0].Err != nil || outs[1].Err != nil {
			t.Fatalf("unfence and write: %v, %v", outs[0].Err, outs[1].Err)
		}
		if errString(outs[2].Err) != "move: move 1 of acme/s was aborted and group "+itoa(src)+" unfenced the session: a move is begun again" {
			t.Fatalf("a late fence: %v", outs[2].Err)
		}
		if g := sm.Holder("acme", "s"); g != src {
			t.Fatalf("held by group %d after the unfence", g)
		}
	}
	late := apply(t, d, dst, moveEntry(t, 1, MethodMoveInstall, "s", install))[0]
	if errString(late.Err) != "move: move 1 of acme/s was aborted: group "+itoa(src)+" took the session back" || d.Holder("acme", "s") != src {
		t.Fatalf("a late install: %v, held by %d", late.Err, d.Holder("acme", "s"))
	}
	for _, sm := range []*SM{a, d} {
		if out := apply(t, sm, dst, moveEntry(t, 2, MethodMoveDrop, "s", MoveDoc{Move: 1, From: src}))[0]; out.Err != nil {
			t.Fatal(out.Err)
		}
	}
	if late := apply(t, c, dst, moveEntry(t, 3, MethodMoveInstall, "s", install))[0]; late.Err == nil || c.Holder("acme", "s") != src {
		t.Fatalf("an install after the drop: %v, held by %d", late.Err, c.Holder("acme", "s"))
	}
	for _, sm := range []*SM{c, d} {
		if !bytes.Equal(logBytes(t, a, "s"), logBytes(t, sm, "s")) || strings.Count(string(logBytes(t, sm, "s")), "\n") != 3 {
			t.Fatal("the logs differ after the abort, or do not hold the write after the unfence")
		}
	}
}

// An install and its drop applied in one batch, on a node that holds the
// source group too (a node that restarts behind both): the drop finds the
// batch's own record of the install and returns the log to the source
// rather than remove it (simulator seed 1993).
func TestMoveInstallAndDropInOneBatch(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	src, dst := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	apply(t, a, src, entryIn(t, "s", 1, "p1"), entryIn(t, "s", 2, "p2"))
	fenced, _ := apply(t, a, src, moveEntry(t, 3, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))[0].Value.(LogEnd)
	before := logBytes(t, a, "s")
	outs := apply(t, a, dst, moveEntry(t, 1, MethodMoveInstall, "s", MoveDoc{Move: 1, From: src, To: dst, Seq: fenced.Seq, Chain: fenced.Chain, Length: fenced.Length}),
		moveEntry(t, 2, MethodMoveDrop, "s", MoveDoc{Move: 1, From: src}))
	if outs[0].Err != nil || outs[1].Err != nil {
		t.Fatalf("install and drop: %v, %v", outs[0].Err, outs[1].Err)
	}
	if g := a.Holder("acme", "s"); g != src || !bytes.Equal(logBytes(t, a, "s"), before) {
		t.Fatalf("held by group %d after the drop, or the log changed", g)
	}
	if outs := apply(t, a, src, moveEntry(t, 4, MethodMoveUnfence, "s", MoveDoc{Move: 1}), entryIn(t, "s", 5, "p3")); outs[1].Err != nil {
		t.Fatalf("a write after the unfence: %v", outs[1].Err)
	}
}

// A destination's snapshot that names a session this node's source
// replica still holds (it has not applied the fence yet): the snapshot's
// log continues the node's, and its tail is taken, the session the
// destination's here; this node's source then refuses its late commands
// as moved and its retire keeps the log (simulator seed 2491). A source's
// snapshot shorter than the destination's log here is passed over.
func TestMoveSnapshotOfTheOtherEnd(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	c := openMoving(t, &a)
	src, dst := GroupOf(testGroups, "acme", "s"), elsewhere("s")
	apply(t, a, src, entryIn(t, "s", 1, "p1"), entryIn(t, "s", 2, "p2"))
	fenced, _ := apply(t, a, src, moveEntry(t, 3, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}))[0].Value.(LogEnd)
	apply(t, a, dst, moveEntry(t, 1, MethodMoveInstall, "s", MoveDoc{Move: 1, From: src, To: dst, Seq: fenced.Seq, Chain: fenced.Chain, Length: fenced.Length}),
		entryIn(t, "s", 2, "in the destination"))
	apply(t, c, src, entryIn(t, "s", 1, "p1")) // c's source is behind
	install(t, a, c, dst)                      // refused before: the session belongs to the source here
	if g := c.Holder("acme", "s"); g != dst || !bytes.Equal(logBytes(t, a, "s"), logBytes(t, c, "s")) {
		t.Fatalf("held by group %d after the restore, or the log differs", g)
	}
	late := apply(t, c, src, entryIn(t, "s", 2, "p2"), moveEntry(t, 3, MethodMoveFence, "s", MoveDoc{Move: 1, To: dst}),
		moveEntry(t, 4, MethodMoveRetire, "s", MoveDoc{Move: 1, To: dst}))
	var mv *Moved
	if !errors.As(late[0].Err, &mv) || late[1].Err != nil || late[2].Err != nil {
		t.Fatalf("late source commands: %v, %v, %v", late[0].Err, late[1].Err, late[2].Err)
	}
	if g := c.Holder("acme", "s"); g != dst || !bytes.Equal(logBytes(t, a, "s"), logBytes(t, c, "s")) {
		t.Fatalf("held by group %d after the retire, or the log differs", g)
	}

	// A source's snapshot from before the fence, on a node whose
	// destination holds more: passed over.
	var e *SM
	e = openMoving(t, &e)
	apply(t, e, src, entryIn(t, "s", 1, "p1"))
	install(t, e, c, src)
	if g := c.Holder("acme", "s"); g != dst || !bytes.Equal(logBytes(t, a, "s"), logBytes(t, c, "s")) {
		t.Fatalf("held by group %d after the source's restore, or the log changed", g)
	}
}

// An aborted move's drop removes the content records its install made in
// the destination, and their receipts, in one batch with the install or
// a later one; a record the group had before the install stays.
func TestMoveDropUnwindsItsContentRecords(t *testing.T) {
	sm, db := openReplica(t, t.TempDir(), "")
	defer db.Close()
	defer sm.Close()
	group := node.MetaGroup + 1
	mine, theirs := digest.HashContent([]byte("moved in")).String(), digest.HashContent([]byte("the group's own")).String()
	err := sm.dataSM.commit(func(b *pebble.Batch) error {
		if err := setJSON(b, contentKey(group, mine), contentRecord{Size: 8, Holders: []uint64{2}, MovedIn: 7}); err != nil {
			return err
		}
		return setJSON(b, contentKey(group, theirs), contentRecord{Size: 15, Holders: []uint64{3}})
	}, true)
	if err != nil {
		t.Fatal(err)
	}
	applyAll(t, sm, []node.Entry{{Index: 2, Kind: node.KindConf}, receiptEntry(t, 3, mine, 1, 2), receiptEntry(t, 4, theirs, 1, 2)})
	drop := func(index, move uint64) {
		doc, _ := json.Marshal(MoveDoc{Move: move, From: group + 1})
		data, err := Command{Method: MethodMoveDrop, Tenant: "acme", Session: "s", TS: at(index), Doc: doc}.Encode()
		if err != nil {
			t.Fatal(err)
		}
		if out := applyAll(t, sm, []node.Entry{{Index: index, Kind: node.KindCommand, Data: data}}); out[index].Err != nil {
			t.Fatal(out[index].Err)
		}
	}
	drop(5, 6) // another move's drop: nothing of move 7's goes
	if got, _ := sm.Contents(group); !slices.Equal(got, slices.Sorted(slices.Values([]string{mine, theirs}))) {
		t.Fatalf("contents after another move's drop: %v", got)
	}
	drop(6, 7)
	if got, err := sm.Contents(group); err != nil || !slices.Equal(got, []string{theirs}) {
		t.Fatalf("contents after the drop: %v %v", got, err)
	}
	if r, _ := sm.Receipts(group, mine); len(r) != 0 {
		t.Fatalf("the dropped content's receipts: %v", r)
	}
	if r, _ := sm.Receipts(group, theirs); len(r) != 1 {
		t.Fatalf("the group's own content's receipts: %v", r)
	}
}

// A stage reads the log for artifact records ahead of the install and
// marks how far; the install reads only what follows the mark, and a mark
// whose line no longer ends with its chain hash (another log in its
// place) counts for nothing.
func TestMoveScansAheadOfTheInstall(t *testing.T) {
	var a *SM
	a = openMoving(t, &a)
	src := GroupOf(testGroups, "acme", "s")
	apply(t, a, src, entryIn(t, "s", 1, "p1"), entryIn(t, "s", 2, "p2"))
	dir, _ := store.SessionDir(a.dataSM.cfg.Root, "acme", "s")
	path := store.LogPath(dir)
	if _, err := a.Stage(context.Background(), "acme", "s", src, 0); err != nil {
		t.Fatal(err)
	}
	mk := a.dataSM.scanned["acme/s"]
	if end, _ := a.dataSM.tailPosition("acme", "s"); mk.at != end || mk.named {
		t.Fatalf("the stage's mark %+v, the log ends at %+v", mk, end)
	}
	apply(t, a, src, entryIn(t, "s", 3, "p3"))
	if named, err := a.dataSM.namesArtifacts("acme", "s", path); err != nil || named {
		t.Fatalf("after a write: %v %v", named, err)
	}
	if end, _ := a.dataSM.tailPosition("acme", "s"); a.dataSM.scanned["acme/s"].at != end {
		t.Fatalf("the mark %+v after the install's read, the log ends at %+v", a.dataSM.scanned["acme/s"], end)
	}
	// A mark that said "named" for bytes no longer there.
	a.dataSM.scanned["acme/s"] = scanMark{at: store.Position{Seq: 1, Offset: 10}, named: true}
	if named, err := a.dataSM.namesArtifacts("acme", "s", path); err != nil || named {
		t.Fatalf("a stale mark: %v %v", named, err)
	}
}
