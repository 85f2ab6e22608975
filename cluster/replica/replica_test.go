package replica

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/cluster/raftlog"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/promise"
	"tally/service"
	"tally/store"
)

// declare is a test method: the promise of the document's text, declared
// through the replica's own sessions.
func declare(sm **SM, failOn string) Method {
	return func(ctx context.Context, _ service.Service, c service.Call, doc []byte) (any, error) {
		var text string
		if err := json.Unmarshal(doc, &text); err != nil {
			return nil, err
		}
		if text == failOn {
			return nil, &fs.PathError{Op: "write", Path: "log.jsonl", Err: fs.ErrPermission}
		}
		l, err := (*sm).Open(ctx, c.Tenant, c.Session, true)
		if err != nil {
			return nil, err
		}
		res, err := l.Submit(ctx, promise.Declare{Text: text, By: c.Actor, To: "bob", Until: c.Now.Add(time.Hour)}, ledger.WriteOptions{Actor: c.Actor})
		if err != nil {
			return nil, err
		}
		return res.Event.ID, nil
	}
}

func openReplica(t *testing.T, dir, failOn string) (*SM, *raftlog.DB) {
	return openReplicaWith(t, dir, failOn, nil)
}

// openReplicaWith opens a replica whose config tweak adjusts first.
func openReplicaWith(t *testing.T, dir, failOn string, tweak func(*Config)) (*SM, *raftlog.DB) {
	return openReplicaFS(t, dir, nil, failOn, tweak)
}

// openReplicaOn opens a replica whose raft store is on fs (a crashable
// memory file system), its ledger on the disk under dir.
func openReplicaOn(t *testing.T, dir string, fs vfs.FS) (*SM, *raftlog.DB) {
	return openReplicaFS(t, dir, fs, "", nil)
}

func openReplicaFS(t *testing.T, dir string, fs vfs.FS, failOn string, tweak func(*Config)) (*SM, *raftlog.DB) {
	t.Helper()
	db, err := raftlog.Open(filepath.Join(dir, "raft"), raftlog.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	var sm *SM
	cfg := Config{Root: filepath.Join(dir, "ledger"), DB: db, Ledger: ledger.DefaultConfig(), Groups: 1,
		Methods: map[string]Method{"declare": declare(&sm, failOn), "use": use(&sm)},
		Service: func(ledgerservice.Sessions) service.Service { return nil }, IdleClose: time.Nanosecond}
	cfg.Ledger.Logger = slog.New(slog.DiscardHandler)
	if tweak != nil {
		tweak(&cfg)
	}
	if sm, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	return sm, db
}

func entry(t *testing.T, index uint64, text string) node.Entry {
	return entryIn(t, "s", index, text)
}

func entryIn(t *testing.T, session string, index uint64, text string) node.Entry {
	doc, _ := json.Marshal(text)
	b, err := Command{Method: "declare", Tenant: "acme", Session: session, Actor: "alice", TS: int64(index) * 1e9, Seed: index, Doc: doc}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return node.Entry{Index: index, Kind: node.KindCommand, Data: b}
}

func head(t *testing.T, sm *SM) (uint64, [32]byte) {
	l, err := sm.Open(context.Background(), "acme", "s", false)
	if err != nil {
		t.Fatal(err)
	}
	p := l.Position()
	return p.Seq, p.Hash
}

// A batch cut short by a failure (a crash between the session's fsync and
// the applied index) runs again after the restart and leaves each session
// as one uninterrupted run would have: no record twice, the same chain.
func TestInterruptedBatchReplaysToTheSameChain(t *testing.T) {
	group := node.MetaGroup + 1
	ref, refDB := openReplica(t, t.TempDir(), "")
	defer refDB.Close()
	defer ref.Close()
	all := []node.Entry{entry(t, 2, "a"), entry(t, 3, "b"), entry(t, 4, "c"), entry(t, 5, "d")}
	if _, err := ref.Apply(group, all); err != nil {
		t.Fatal(err)
	}
	wantSeq, wantHash := head(t, ref)

	dir := t.TempDir()
	sm, db := openReplica(t, dir, "d")
	if _, err := sm.Apply(group, all[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.Apply(group, all[2:]); err == nil {
		t.Fatal("the failing method did not fail the batch")
	}
	if seq, _ := head(t, sm); seq != 3 {
		t.Fatalf("before the restart the session holds %d records, want 3 (c applied, d not)", seq)
	}
	sm.Close()
	db.Close()

	sm, db = openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	applied, err := sm.Applied(group)
	if err != nil {
		t.Fatal(err)
	}
	if applied != 3 {
		t.Fatalf("applied %d after the restart, want 3", applied)
	}
	if _, err := sm.Apply(group, all[2:]); err != nil {
		t.Fatal(err)
	}
	if seq, hash := head(t, sm); seq != wantSeq || hash != wantHash {
		t.Fatalf("after the replay: seq %d hash %x, want %d %x", seq, hash[:4], wantSeq, wantHash[:4])
	}
}

// A crash after a batch wrote its sessions' logs and before their fsync
// (fault.Replica.BeforeSync) may leave any tail of what it wrote, down to the
// durable position before it and cut mid-line: the restart cuts it back
// and the batch runs again to the same chain.
func TestCrashBeforeSyncRecoversATornTail(t *testing.T) {
	group := node.MetaGroup + 1
	all := []node.Entry{entry(t, 2, "a"), entry(t, 3, "b"), entry(t, 4, "c")}
	ref, refDB := openReplica(t, t.TempDir(), "")
	defer refDB.Close()
	defer ref.Close()
	if _, err := ref.Apply(group, all); err != nil {
		t.Fatal(err)
	}
	wantSeq, wantHash := head(t, ref)

	dir := t.TempDir()
	crash := errors.New("crash")
	var before map[string]store.Position
	sm, db := openReplicaWith(t, dir, "", nil)
	sm.Inject(fault.Replica{BeforeSync: func(_ uint64, b map[string]store.Position) error {
		if b["acme/s"].Seq > 0 { // the second batch: the session holds a record
			before = maps.Clone(b)
			return crash
		}
		return nil
	}})
	if _, err := sm.Apply(group, all[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.Apply(group, all[1:]); !errors.Is(err, crash) {
		t.Fatalf("the batch ended with %v, want the crash", err)
	}
	sm.Close()
	db.Close()
	// Lose the unsynced tail down to one byte into the batch's first line.
	floor := before["acme/s"].Offset
	if err := os.Truncate(filepath.Join(dir, "ledger", "sessions", "acme", "s", "log.jsonl"), floor+1); err != nil {
		t.Fatal(err)
	}

	sm, db = openReplica(t, dir, "")
	defer db.Close()
	defer sm.Close()
	if applied, err := sm.Applied(group); err != nil || applied != 2 {
		t.Fatalf("applied %d (%v) after the restart, want 2", applied, err)
	}
	if _, err := sm.Apply(group, all[1:]); err != nil {
		t.Fatal(err)
	}
	if seq, hash := head(t, sm); seq != wantSeq || hash != wantHash {
		t.Fatalf("after the replay: seq %d hash %x, want %d %x", seq, hash[:4], wantSeq, wantHash[:4])
	}
}

// A snapshot of a group, restored on another replica, gives it the same
// sessions, chains and applied index. The manifest is taken at the applied
// index and the body written after the group applied more: the body is
// the logs as of the manifest, not as they are by then.
func TestSnapshotRestoresTheSameChains(t *testing.T) {
	group := node.MetaGroup + 1
	src, srcDB := openReplica(t, t.TempDir(), "")
	defer srcDB.Close()
	defer src.Close()
	if _, err := src.Apply(group, []node.Entry{entry(t, 2, "a"), entryIn(t, "t", 3, "b")}); err != nil {
		t.Fatal(err)
	}
	idx, man, err := src.Snapshot(group)
	if err != nil || idx != 3 || len(snapshotSessions(t, src, group)) != 2 {
		t.Fatalf("snapshot at %d with %+v: %v", idx, man.Entries, err)
	}
	s1, h1 := head(t, src)
	if _, err := src.Apply(group, []node.Entry{entry(t, 4, "c")}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := src.WriteSnapshot(group, man, &buf); err != nil {
		t.Fatal(err)
	}
	if uint64(buf.Len()) != man.BodySize() {
		t.Fatalf("body of %d bytes, the manifest says %d", buf.Len(), man.BodySize())
	}
	dst, dstDB := openReplica(t, t.TempDir(), "")
	defer dstDB.Close()
	defer dst.Close()
	// The manifest crosses the wire as the MsgSnap's data.
	wire, err := node.UnmarshalManifest(man.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(group, idx, wire, &buf); err != nil {
		t.Fatal(err)
	}
	if a, _ := dst.Applied(group); a != 3 {
		t.Fatalf("restored applied %d, want 3", a)
	}
	if s2, h2 := head(t, dst); s1 != s2 || h1 != h2 {
		t.Fatalf("restored head %d %x, source's at the snapshot %d %x", s2, h2[:4], s1, h1[:4])
	}
	// The restored replica applies what followed and joins the source.
	if _, err := dst.Apply(group, []node.Entry{entry(t, 4, "c")}); err != nil {
		t.Fatal(err)
	}
	s1, h1 = head(t, src)
	if s2, h2 := head(t, dst); s1 != s2 || h1 != h2 {
		t.Fatalf("after one more entry: %d %x vs %d %x", s2, h2[:4], s1, h1[:4])
	}
	if dst.Restores() != 1 {
		t.Fatalf("%d restores counted", dst.Restores())
	}
}

// A body that cannot be what the manifest names fails, on either side: a
// log shorter than its length when the body is written, an entry of a kind
// the replica does not know, a body cut short.
func TestSnapshotRefusesWhatTheManifestDoesNotHold(t *testing.T) {
	group := node.MetaGroup + 1
	src, srcDB := openReplica(t, t.TempDir(), "")
	defer srcDB.Close()
	defer src.Close()
	if _, err := src.Apply(group, []node.Entry{entry(t, 2, "a")}); err != nil {
		t.Fatal(err)
	}
	_, man, err := src.Snapshot(group)
	if err != nil {
		t.Fatal(err)
	}
	long := man
	s := snapshotSessions(t, src, group)[0]
	long.Entries = []node.ManifestEntry{{Kind: kindSessionLog, Name: s.Name, Length: s.Length + 1}}
	if err := src.WriteSnapshot(group, long, io.Discard); err == nil || !strings.Contains(err.Error(), "fewer than") {
		t.Fatalf("a log shorter than its manifest length: %v", err)
	}
	other := man
	other.Entries = []node.ManifestEntry{{Kind: "mystery", Name: "d1", Length: 4}}
	if err := src.WriteSnapshot(group, other, io.Discard); err == nil {
		t.Fatal("an unknown kind was written")
	}
	dst, dstDB := openReplica(t, t.TempDir(), "")
	defer dstDB.Close()
	defer dst.Close()
	if err := dst.Restore(group, 2, other, strings.NewReader("abcd")); err == nil || !strings.Contains(err.Error(), "unknown kind") {
		t.Fatalf("an unknown kind restored: %v", err)
	}
	var buf bytes.Buffer
	if err := src.WriteSnapshot(group, man, &buf); err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(group, 2, man, bytes.NewReader(buf.Bytes()[:buf.Len()-1])); err == nil {
		t.Fatal("a body cut short restored")
	}
}

// The meta group's snapshot is inline: its membership, restored whole.
func TestMetaSnapshotIsInline(t *testing.T) {
	src, srcDB := openReplica(t, t.TempDir(), "")
	defer srcDB.Close()
	defer src.Close()
	add, _ := json.Marshal(MetaCommand{Op: OpMemberAdd, Member: &Member{ID: 7, RaftAddr: "h:1", Addr: "h:2"}})
	if _, err := src.Apply(node.MetaGroup, []node.Entry{{Index: 2, Kind: node.KindCommand, Data: add}}); err != nil {
		t.Fatal(err)
	}
	idx, man, err := src.Snapshot(node.MetaGroup)
	if err != nil || idx != 2 || len(man.Entries) != 0 || man.BodySize() != 0 {
		t.Fatalf("meta snapshot %d %+v: %v", idx, man, err)
	}
	dst, dstDB := openReplica(t, t.TempDir(), "")
	defer dstDB.Close()
	defer dst.Close()
	if err := dst.Restore(node.MetaGroup, idx, man, strings.NewReader("")); err != nil {
		t.Fatal(err)
	}
	if ms := dst.Members(); len(ms) != 1 || ms[0].ID != 7 {
		t.Fatalf("restored members %+v", ms)
	}
}

// restoredCopy is a new replica that installed src's snapshot of its first
// data group, taken at index; it is closed when the test ends.
func restoredCopy(t *testing.T, src *SM, index uint64) *SM {
	t.Helper()
	group := node.MetaGroup + 1
	idx, man, err := src.Snapshot(group)
	if err != nil || idx != index {
		t.Fatalf("snapshot at %d, want %d: %v", idx, index, err)
	}
	var buf bytes.Buffer
	if err := src.WriteSnapshot(group, man, &buf); err != nil {
		t.Fatal(err)
	}
	dst, db := openReplica(t, t.TempDir(), "")
	t.Cleanup(func() { dst.Close(); db.Close() })
	// The manifest crosses the wire as the MsgSnap's data.
	wire, err := node.UnmarshalManifest(man.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if err := dst.Restore(group, idx, wire, &buf); err != nil {
		t.Fatal(err)
	}
	return dst
}

// Past MaxOpen the idle sessions are closed after a batch, and one closed
// reopens and goes on as if it never was.
func TestIdleSessionsCloseAndReopen(t *testing.T) {
	group := node.MetaGroup + 1
	sm, db := openReplicaWith(t, t.TempDir(), "", func(c *Config) { c.MaxOpen = 1 })
	defer db.Close()
	defer sm.Close()
	ref, refDB := openReplica(t, t.TempDir(), "")
	defer refDB.Close()
	defer ref.Close()
	batches := [][]node.Entry{
		{entryIn(t, "a", 2, "1"), entryIn(t, "b", 3, "2"), entryIn(t, "c", 4, "3")},
		{entryIn(t, "a", 5, "4"), entryIn(t, "b", 6, "5")},
	}
	for _, b := range batches {
		for _, r := range []*SM{sm, ref} {
			if _, err := r.Apply(group, b); err != nil {
				t.Fatal(err)
			}
		}
		sm.dataSM.mu.Lock()
		open := len(sm.dataSM.ledgers)
		sm.dataSM.mu.Unlock()
		if open != 1 {
			t.Fatalf("%d sessions open after a batch, want 1 (MaxOpen)", open)
		}
	}
	for _, s := range []string{"a", "b", "c"} {
		l1, err := sm.Open(context.Background(), "acme", s, false)
		if err != nil {
			t.Fatal(err)
		}
		l2, err := ref.Open(context.Background(), "acme", s, false)
		if err != nil {
			t.Fatal(err)
		}
		if l1.Position() != l2.Position() {
			t.Fatalf("session %s: %+v after reopening, %+v kept open", s, l1.Position(), l2.Position())
		}
	}
}
