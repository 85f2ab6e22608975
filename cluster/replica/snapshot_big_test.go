package replica

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
	"tally/cluster/transport"
)

// overTheWire sends a snapshot's manifest (as a MsgSnap's data, in one
// frame of the default bound) and its body (written by write) from one
// TCP transport to another on 127.0.0.1, and returns what arrived.
func overTheWire(t *testing.T, group uint64, idx uint64, man node.Manifest, write func(io.Writer) error) (node.Manifest, io.ReadCloser) {
	t.Helper()
	cfg := func(id uint64) transport.Config {
		c := transport.DefaultConfig()
		c.NodeID, c.ClusterID, c.Secret, c.Listen = id, "c1", []byte("the secret of c1"), "127.0.0.1:0"
		return c
	}
	rc := cfg(2)
	rc.SpoolDir = t.TempDir()
	rcv, err := transport.Listen(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Close() })
	snd, err := transport.Listen(cfg(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close() })
	snd.AddPeer(2, rcv.Addr())
	env := node.Envelope{Group: group, Msg: &pb.Message{
		Type: pb.MessageType_MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3)),
		Snapshot: &pb.Snapshot{Data: man.Marshal(), Metadata: &pb.SnapshotMetadata{Index: new(idx), Term: new(uint64(3))}},
	}}
	done := make(chan error, 1)
	snd.SendSnapshot(2, node.OutboundSnapshot{Envelope: env, Size: man.BodySize(), Write: write, Done: func(err error) { done <- err }})
	deadline := time.After(2 * time.Minute)
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("the snapshot was not sent: %v", err)
			}
		case b := <-rcv.Inbox():
			if b[0].Snapshot == nil {
				continue
			}
			b[0].Snapshot.Stepped(true)
			got, err := node.UnmarshalManifest(b[0].Msg.GetSnapshot().GetData())
			if err != nil {
				t.Fatal(err)
			}
			return got, b[0].Snapshot.Body
		case <-deadline:
			t.Fatal("no snapshot arrived")
		}
	}
}

// sessionName is the i-th of n sessions whose "tenant/session" names are
// size bytes long.
func sessionName(i, size int) (tenant, session string) {
	tenant = "acme"
	session = fmt.Sprintf("s%0*d", size-len(tenant)-2, i)
	return tenant, session
}

// A meta group whose directory holds more placements than 4 MiB of names
// (150,000 sessions, names of 40 bytes) is snapshotted, streamed between
// two transports with the default frame bound, and installed: the
// manifest's frame holds the ranges' heads, not their entries. Inline, as
// before, the directory alone would not fit in a frame.
func TestMetaSnapshotBeyondAFrame(t *testing.T) {
	const n, size = 150_000, 40
	dir := memDir(t)
	sm, db := openReplicaWith(t, dir, "", func(c *Config) { c.Groups = testGroups })
	inline := map[string]uint64{}
	var index uint64
	for first := 0; first < n; first += 5000 {
		var ents []node.Entry
		for i := first; i < min(first+5000, n); i++ {
			tenant, session := sessionName(i, size)
			g := GroupOf(testGroups, tenant, session)%testGroups + 2 // another group than its hash's
			index++
			ents = append(ents, metaEntry(t, index, MetaCommand{Op: OpPlacementSet, Placement: &Placement{Tenant: tenant, Session: session, Group: g}}))
			inline[tenant+"/"+session] = g
		}
		if _, err := sm.Apply(node.MetaGroup, ents); err != nil {
			t.Fatal(err)
		}
	}
	if c := sm.PlacementCount(); c != n {
		t.Fatalf("%d placements, want %d", c, n)
	}
	if old, _ := json.Marshal(snapshotHead{Placements: inline, Epochs: inline}); len(old) <= transport.DefaultMaxFrameSize {
		t.Fatalf("the directory inline is %d bytes: the test does not reach past a frame", len(old))
	}
	idx, man, err := sm.Snapshot(node.MetaGroup)
	if err != nil {
		t.Fatal(err)
	}
	frame := len(man.Marshal())
	if frame > transport.DefaultMaxFrameSize/16 {
		t.Fatalf("the manifest is %d bytes", frame)
	}
	t.Logf("manifest %d bytes for %d ranges: %d a range", frame, len(man.Entries), frame/len(man.Entries))
	got, body := overTheWire(t, node.MetaGroup, idx, man, func(w io.Writer) error { return sm.WriteSnapshot(node.MetaGroup, man, w) })
	defer body.Close()
	other, otherDB := openReplicaWith(t, filepath.Join(dir, "other"), "", func(c *Config) { c.Groups = testGroups })
	if err := other.Restore(node.MetaGroup, idx, got, body); err != nil {
		t.Fatal(err)
	}
	check := func(what string, r *SM) {
		t.Helper()
		if c := r.PlacementCount(); c != n {
			t.Fatalf("%s: %d placements, want %d", what, c, n)
		}
		for _, i := range []int{0, 1, n / 2, n - 1} {
			tenant, session := sessionName(i, size)
			if g := r.GroupOf(tenant, session); g != inline[tenant+"/"+session] {
				t.Fatalf("%s: %s/%s in group %d, want %d", what, tenant, session, g, inline[tenant+"/"+session])
			}
			if e := r.EpochOf(tenant, session); e != 1 {
				t.Fatalf("%s: %s/%s at epoch %d", what, tenant, session, e)
			}
		}
		if a, b := starts(r.Directory()), starts(sm.Directory()); a != b {
			t.Fatalf("%s: another layout of the ranges", what)
		}
	}
	check("installed", other)
	other.Close()
	otherDB.Close()
	again, againDB := openReplicaWith(t, filepath.Join(dir, "other"), "", func(c *Config) { c.Groups = testGroups })
	defer againDB.Close()
	defer again.Close()
	check("installed, after a restart", again)
	sm.Close()
	db.Close()
}

// A snapshot of the previous release, its directory inline in the head
// (placements and epochs), is still installed.
func TestMetaSnapshotOfThePreviousRelease(t *testing.T) {
	head := snapshotHead{
		Applied:    applied{Index: 9},
		Members:    []Member{{ID: 1, RaftAddr: "a:1", Addr: "a:2"}},
		Placements: map[string]uint64{"acme/a": 3, "acme/b": 4},
		Epochs:     map[string]uint64{"acme/a": 1, "acme/b": 2, "acme/c": 1},
	}
	inline, _ := json.Marshal(head)
	sm := openPlaced(t, t.TempDir())
	if err := sm.Restore(node.MetaGroup, 9, node.Manifest{Inline: inline}, bytes.NewReader(nil)); err != nil {
		t.Fatal(err)
	}
	if g := sm.GroupOf("acme", "b"); g != 4 || sm.EpochOf("acme", "b") != 2 || sm.EpochOf("acme", "c") != 1 || sm.PlacementCount() != 2 {
		t.Fatalf("group %d epoch %d, %d placements", g, sm.EpochOf("acme", "b"), sm.PlacementCount())
	}
	if ps := sm.Placements(); len(ps) != 2 || ps[0] != (Placement{Tenant: "acme", Session: "a", Group: 3}) {
		t.Fatalf("placements %+v", ps)
	}
}

// A body whose range does not match its head (another digest, a name
// outside its bounds) is refused.
func TestMetaSnapshotRefusesABadRange(t *testing.T) {
	sm := openPlaced(t, t.TempDir())
	apply(t, sm, node.MetaGroup, metaEntry(t, 1, MetaCommand{Op: OpPlacementSet, Placement: &Placement{Tenant: "acme", Session: "s", Group: elsewhere("s")}}))
	idx, man, body := takeSnapshot(t, sm, node.MetaGroup)
	bad := bytes.Clone(body.Bytes())
	bad[len(bad)-1]++ // the epoch
	other := openPlaced(t, t.TempDir())
	if err := other.Restore(node.MetaGroup, idx, man, bytes.NewReader(bad)); err == nil {
		t.Fatal("a range with another digest was installed")
	}
	if err := other.Restore(node.MetaGroup, idx, man, bytes.NewReader(body.Bytes())); err != nil {
		t.Fatal(err)
	}
	if other.GroupOf("acme", "s") != elsewhere("s") {
		t.Fatal("not installed")
	}
}

// takeSnapshot is sm's snapshot of group: its index, manifest and body.
func takeSnapshot(t *testing.T, sm *SM, group uint64) (uint64, node.Manifest, *bytes.Buffer) {
	t.Helper()
	idx, man, err := sm.Snapshot(group)
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	if err := sm.WriteSnapshot(group, man, &body); err != nil {
		t.Fatal(err)
	}
	return idx, man, &body
}

// snapshotSessions are the sessions sm's snapshot of group holds, with
// their logs' lengths, as its body's state names them.
func snapshotSessions(t *testing.T, sm *SM, group uint64) []SessionLength {
	t.Helper()
	_, man, body := takeSnapshot(t, sm, group)
	if len(man.Entries) == 0 || man.Entries[0].Kind != kindGroupState {
		t.Fatalf("the snapshot's first entry is not its state: %+v", man.Entries)
	}
	st, err := readGroupState(man.Entries[0], io.LimitReader(body, int64(man.Entries[0].Length)))
	if err != nil {
		t.Fatal(err)
	}
	return st.Sessions
}

// A data group with more sessions than fit in a frame's names (32,000,
// each named with the longest tenant and session, 129 bytes: one entry
// each in the previous release's manifest would take more than 4 MiB) is
// snapshotted, streamed between two transports with the default frame
// bound, and installed with every session's log.
func TestDataSnapshotBeyondAFrame(t *testing.T) {
	const n = 32_000
	group := node.MetaGroup + 1
	dir := memDir(t)
	sm, db := openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	tenant := "t" + strings.Repeat("e", 63)
	name := func(i int) string { return fmt.Sprintf("s%063d", i) }
	for first := 0; first < n; first += 4000 {
		var ents []node.Entry
		for i := first; i < min(first+4000, n); i++ {
			doc, _ := json.Marshal(fmt.Sprintf("promise %d", i))
			idx := uint64(i + 1)
			b, err := Command{Method: "declare", Tenant: tenant, Session: name(i), Actor: "alice", TS: int64(idx) * 1e9, Seed: idx, Doc: doc}.Encode()
			if err != nil {
				t.Fatal(err)
			}
			ents = append(ents, node.Entry{Index: idx, Kind: node.KindCommand, Data: b})
		}
		if _, err := sm.Apply(group, ents); err != nil {
			t.Fatal(err)
		}
	}
	idx, man, err := sm.Snapshot(group)
	if err != nil {
		t.Fatal(err)
	}
	if frame := len(man.Marshal()); frame > 4096 {
		t.Fatalf("the manifest is %d bytes", frame)
	}
	sessions := snapshotSessions(t, sm, group)
	if len(sessions) != n {
		t.Fatalf("%d sessions in the snapshot, want %d", len(sessions), n)
	}
	old := node.Manifest{Inline: []byte("{}")}
	for _, s := range sessions {
		old.Entries = append(old.Entries, node.ManifestEntry{Kind: kindSessionLog, Name: s.Name, Length: s.Length})
	}
	if size := len(old.Marshal()); size <= transport.DefaultMaxFrameSize {
		t.Fatalf("one entry a session takes %d bytes: the test does not reach past a frame", size)
	}
	got, body := overTheWire(t, group, idx, man, func(w io.Writer) error { return sm.WriteSnapshot(group, man, w) })
	defer body.Close()
	other, otherDB := openReplica(t, filepath.Join(dir, "other"), "")
	defer otherDB.Close()
	defer other.Close()
	if err := other.Restore(group, idx, got, body); err != nil {
		t.Fatal(err)
	}
	if got := snapshotSessions(t, other, group); !slices.Equal(got, sessions) {
		t.Fatalf("the installed group holds %d sessions", len(got))
	}
	for _, i := range []int{0, n / 2, n - 1} {
		a, err := sm.Open(t.Context(), tenant, name(i), false)
		if err != nil {
			t.Fatal(err)
		}
		b, err := other.Open(t.Context(), tenant, name(i), false)
		if err != nil {
			t.Fatal(err)
		}
		if pa, pb := a.Position(), b.Position(); pa.Seq != pb.Seq || pa.Hash != pb.Hash {
			t.Fatalf("session %d: %d %x installed as %d %x", i, pa.Seq, pa.Hash[:4], pb.Seq, pb.Hash[:4])
		}
	}
}

// memDir is a temporary directory in memory (/dev/shm) where there is one,
// else on disk: the large snapshot tests write tens of thousands of
// sessions, each log synced, which a disk shared with other work takes
// minutes over.
func memDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("/dev/shm", "tally-replica-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// A data group's snapshot of the previous release (the group's state
// inline, one "log" entry a session) is still installed.
func TestDataSnapshotOfThePreviousRelease(t *testing.T) {
	group := node.MetaGroup + 1
	src, srcDB := openReplica(t, t.TempDir(), "")
	defer srcDB.Close()
	defer src.Close()
	if _, err := src.Apply(group, []node.Entry{entry(t, 2, "a"), entryIn(t, "t", 3, "b"), fenceEntry(t, 4, "u", group+1)}); err != nil {
		t.Fatal(err)
	}
	idx, man, body := takeSnapshot(t, src, group)
	st, err := readGroupState(man.Entries[0], io.LimitReader(body, int64(man.Entries[0].Length)))
	if err != nil {
		t.Fatal(err)
	}
	sessions := st.Sessions
	st.Sessions = nil
	inline, _ := json.Marshal(st)
	old := node.Manifest{Inline: inline}
	for _, s := range sessions {
		old.Entries = append(old.Entries, node.ManifestEntry{Kind: kindSessionLog, Name: s.Name, Length: s.Length})
	}
	var oldBody bytes.Buffer
	if err := src.WriteSnapshot(group, old, &oldBody); err != nil {
		t.Fatal(err)
	}
	if uint64(oldBody.Len()) != man.Entries[1].Length || len(sessions) != 2 {
		t.Fatalf("the old form's body is %d bytes, the logs %d", oldBody.Len(), man.Entries[1].Length)
	}
	dst, dstDB := openReplica(t, t.TempDir(), "")
	defer dstDB.Close()
	defer dst.Close()
	wire, err := node.UnmarshalManifest(old.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(group, idx, wire, &oldBody); err != nil {
		t.Fatal(err)
	}
	if got := snapshotSessions(t, dst, group); !slices.Equal(got, sessions) {
		t.Fatalf("installed %+v, want %+v", got, sessions)
	}
	if g, ok := dst.FencedTo(group, "acme", "u"); !ok || g != group+1 {
		t.Fatalf("the fence was not installed: %d %v", g, ok)
	}
	// A chunked manifest whose state is not first is refused.
	swapped := man
	swapped.Entries = slices.Clone(man.Entries)
	swapped.Entries[0], swapped.Entries[1] = swapped.Entries[1], swapped.Entries[0]
	_, _, body = takeSnapshot(t, src, group)
	if err := dst.Restore(group, idx, swapped, body); err == nil {
		t.Fatal("a manifest with its logs before its state was installed")
	}
}

// The body of a meta snapshot is written from the directory that snapshot
// kept; one asked for after more than snapshotsKept newer snapshots fails
// (raft sends a newer one).
func TestMetaSnapshotBodyNoLongerKept(t *testing.T) {
	sm := openPlaced(t, t.TempDir())
	var first node.Manifest
	for i := range uint64(snapshotsKept + 1) {
		apply(t, sm, node.MetaGroup, metaEntry(t, i+1, MetaCommand{Op: OpPlacementSet, Placement: &Placement{Tenant: "acme", Session: fmt.Sprint("s", i), Group: elsewhere(fmt.Sprint("s", i))}}))
		_, man, err := sm.Snapshot(node.MetaGroup)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = man
		}
	}
	if err := sm.WriteSnapshot(node.MetaGroup, first, io.Discard); err == nil || !strings.Contains(err.Error(), "no longer kept") {
		t.Fatalf("the body of a snapshot no longer kept: %v", err)
	}
}
