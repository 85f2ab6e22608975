package raftlog

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

func openMem(t *testing.T, fs vfs.FS) *DB {
	t.Helper()
	db, err := Open("/db", Options{FS: fs})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return db
}

func ent(index, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(index), Term: new(term), Type: new(pb.EntryType_EntryNormal), Data: []byte(data)}
}

func commit(t *testing.T, db *DB, f func(b *Batch) error) {
	t.Helper()
	b := db.NewBatch()
	if err := f(b); err != nil {
		t.Fatalf("batch: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

func group(t *testing.T, db *DB, id uint64) *Storage {
	t.Helper()
	s, err := db.Group(id)
	if err != nil {
		t.Fatalf("group %d: %v", id, err)
	}
	return s
}

// TestContractMatchesMemoryStorage drives raftlog and raft's MemoryStorage
// (the contract's reference) with the same random appends (including
// overwrites of a suffix), compactions, snapshots created and installed, and
// restarts, and requires identical answers from every read.
func TestContractMatchesMemoryStorage(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { contractRun(t, seed) })
	}
}

func contractRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fs := vfs.NewMem()
	db := openMem(t, fs)
	defer func() { db.Close() }()
	const gid = 3
	s := group(t, db, gid)
	// A second group shares every batch, to show prefixes keep them apart.
	other := group(t, db, gid+1)
	ms := raft.NewMemoryStorage()
	term := uint64(1)
	noise := uint64(0)
	for step := 0; step < 200; step++ {
		first, _ := ms.FirstIndex()
		last, _ := ms.LastIndex()
		switch op := rng.IntN(10); {
		case op < 5: // append, sometimes overwriting a suffix
			start := last + 1
			if last >= first && rng.IntN(3) == 0 {
				start = first + uint64(rng.IntN(int(last-first+1)))
				term++
			}
			n := 1 + rng.IntN(5)
			var ents []*pb.Entry
			for i := 0; i < n; i++ {
				ents = append(ents, ent(start+uint64(i), term, fmt.Sprintf("e%d-%d", step, i)))
			}
			if err := ms.Append(ents); err != nil {
				t.Fatal(err)
			}
			commit(t, db, func(b *Batch) error {
				noise++
				if err := b.Append(other, []*pb.Entry{ent(noise, 1, "noise")}); err != nil {
					return err
				}
				if err := b.Append(s, ents); err != nil {
					return err
				}
				return b.SetHardState(s, &pb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(start - 1)})
			})
		case op < 6 && last > first: // compact
			i := first + uint64(rng.IntN(int(last-first)))
			werr := ms.Compact(i)
			b := db.NewBatch()
			gerr := b.Compact(s, i)
			if !errors.Is(gerr, werr) {
				t.Fatalf("compact %d: got %v want %v", i, gerr, werr)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		case op < 7 && last >= first: // create snapshot
			i := first - 1 + uint64(rng.IntN(int(last-first+2)))
			cs := &pb.ConfState{Voters: []uint64{1, 2, 3}}
			_, werr := ms.CreateSnapshot(i, cs, nil)
			b := db.NewBatch()
			gerr := b.CreateSnapshot(s, i, cs)
			if !errors.Is(gerr, werr) {
				t.Fatalf("create snapshot %d: got %v want %v", i, gerr, werr)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
		case op < 8: // install a snapshot, sometimes an out-of-date one
			idx := last + uint64(rng.IntN(5))
			if idx > 2 {
				idx -= 2
			}
			if rng.IntN(2) == 0 {
				term++
			}
			snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(idx), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{4}}}}
			werr := ms.ApplySnapshot(snap)
			b := db.NewBatch()
			gerr := b.ApplySnapshot(s, snap)
			if !errors.Is(gerr, werr) {
				t.Fatalf("apply snapshot %d: got %v want %v", idx, gerr, werr)
			}
			if err := b.Commit(); err != nil {
				t.Fatal(err)
			}
			if werr == nil {
				_, cs, _ := s.InitialState()
				if !proto.Equal(cs, pb.EnsureConfState(snap.Metadata.ConfState)) {
					t.Fatalf("conf state after snapshot: %v", cs)
				}
			}
		case op < 9: // restart
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db = openMem(t, fs)
			s = group(t, db, gid)
			other = group(t, db, gid+1)
			if l, _ := other.LastIndex(); l != noise {
				t.Fatalf("other group last %d after restart, want %d", l, noise)
			}
		}
		compareStorage(t, step, s, ms, rng)
	}
}

func compareStorage(t *testing.T, step int, s *Storage, ms *raft.MemoryStorage, rng *rand.Rand) {
	t.Helper()
	wf, _ := ms.FirstIndex()
	wl, _ := ms.LastIndex()
	gf, _ := s.FirstIndex()
	gl, _ := s.LastIndex()
	if gf != wf || gl != wl {
		t.Fatalf("step %d: first/last %d/%d, want %d/%d", step, gf, gl, wf, wl)
	}
	for i := wf - 1; i <= wl+1; i++ {
		wt, werr := ms.Term(i)
		gt, gerr := s.Term(i)
		if gt != wt || !errors.Is(gerr, werr) {
			t.Fatalf("step %d: term(%d) = %d, %v; want %d, %v", step, i, gt, gerr, wt, werr)
		}
	}
	if wf >= 2 {
		if _, err := s.Term(wf - 2); !errors.Is(err, raft.ErrCompacted) {
			t.Fatalf("step %d: term below truncation: %v", step, err)
		}
	}
	for k := 0; k < 5; k++ {
		lo := wf - 1 + uint64(rng.IntN(int(wl-wf+3)))
		hi := lo + uint64(rng.IntN(int(wl+2-lo)))
		if hi > wl+1 {
			hi = wl + 1
		}
		if lo > hi {
			continue
		}
		maxSize := uint64(rng.IntN(120))
		if rng.IntN(3) == 0 {
			maxSize = 1 << 62
		}
		we, werr := ms.Entries(lo, hi, maxSize)
		ge, gerr := s.Entries(lo, hi, maxSize)
		if lo == hi && werr == nil && gerr == nil {
			continue
		}
		if !errors.Is(gerr, werr) || len(ge) != len(we) {
			t.Fatalf("step %d: entries(%d,%d,%d) = %d, %v; want %d, %v", step, lo, hi, maxSize, len(ge), gerr, len(we), werr)
		}
		for i := range we {
			if !proto.Equal(ge[i], we[i]) {
				t.Fatalf("step %d: entry %d = %v, want %v", step, i, ge[i], we[i])
			}
		}
	}
	wsnap, _ := ms.Snapshot()
	gsnap, _ := s.Snapshot()
	if wsnap.GetMetadata().GetIndex() != gsnap.GetMetadata().GetIndex() || wsnap.GetMetadata().GetTerm() != gsnap.GetMetadata().GetTerm() {
		t.Fatalf("step %d: snapshot %v, want %v", step, gsnap.GetMetadata(), wsnap.GetMetadata())
	}
}

func TestEntriesBoundsAndSize(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	s := group(t, db, 1)
	if _, err := s.Entries(1, 1, 100); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("empty log: %v, want ErrUnavailable", err)
	}
	commit(t, db, func(b *Batch) error {
		return b.Append(s, []*pb.Entry{ent(1, 1, "aaaa"), ent(2, 1, "bbbb"), ent(3, 2, "cccc"), ent(4, 2, "dddd")})
	})
	es, err := s.Entries(2, 4, 1<<30)
	if err != nil || len(es) != 2 || es[0].GetIndex() != 2 || es[1].GetIndex() != 3 {
		t.Fatalf("entries [2,4): %v %v", es, err)
	}
	one := uint64(proto.Size(ent(1, 1, "aaaa")))
	if es, _ := s.Entries(1, 5, 0); len(es) != 1 {
		t.Fatalf("maxSize 0 gives %d entries, want the first alone", len(es))
	}
	if es, _ := s.Entries(1, 5, 2*one); len(es) != 2 {
		t.Fatalf("maxSize of two entries gives %d", len(es))
	}
	if _, err := s.Entries(1, 6, 100); err == nil {
		t.Fatal("hi beyond last+1 accepted")
	}
	commit(t, db, func(b *Batch) error { return b.Compact(s, 2) })
	if _, err := s.Entries(2, 4, 100); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("entries at truncation: %v", err)
	}
	if tm, err := s.Term(2); err != nil || tm != 1 {
		t.Fatalf("term at truncation: %d %v", tm, err)
	}
	if _, err := s.Term(1); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("term below truncation: %v", err)
	}
	if _, err := s.Term(5); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("term beyond last: %v", err)
	}
	b := db.NewBatch()
	if err := b.Compact(s, 2); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("compact again: %v", err)
	}
	if err := b.Append(s, []*pb.Entry{ent(7, 2, "gap")}); err == nil {
		t.Fatal("append with a gap accepted")
	}
	b.Close()
}

// TestSuffixTruncationSurvivesRestart: entries overwritten by a new leader
// must not reappear after a restart.
func TestSuffixTruncationSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs)
	s := group(t, db, 9)
	commit(t, db, func(b *Batch) error {
		return b.Append(s, []*pb.Entry{ent(1, 1, "a"), ent(2, 1, "b"), ent(3, 1, "c"), ent(4, 1, "d")})
	})
	commit(t, db, func(b *Batch) error { return b.Append(s, []*pb.Entry{ent(2, 2, "B")}) })
	db.Close()
	db = openMem(t, fs)
	defer db.Close()
	s = group(t, db, 9)
	if l, _ := s.LastIndex(); l != 2 {
		t.Fatalf("last index after restart %d, want 2", l)
	}
	es, err := s.Entries(1, 3, 1<<20)
	if err != nil || string(es[1].GetData()) != "B" || es[1].GetTerm() != 2 {
		t.Fatalf("entries after restart: %v %v", es, err)
	}
}

// TestCrashKeepsSyncedBatches: a crash loses nothing a committed batch wrote,
// across all the groups it touched, and a restart reads the same state.
func TestCrashKeepsSyncedBatches(t *testing.T) {
	fs := vfs.NewCrashableMem()
	db := openMem(t, fs)
	var gs []*Storage
	for g := uint64(0); g < 4; g++ {
		gs = append(gs, group(t, db, g))
	}
	for i := uint64(1); i <= 50; i++ {
		commit(t, db, func(b *Batch) error {
			for _, s := range gs {
				if err := b.Append(s, []*pb.Entry{ent(i, 1, fmt.Sprint(s.ID(), i))}); err != nil {
					return err
				}
				if err := b.SetHardState(s, &pb.HardState{Term: new(uint64(1)), Commit: new(i)}); err != nil {
					return err
				}
			}
			return nil
		})
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	db.Close()
	db = openMem(t, crashed)
	defer db.Close()
	for g := uint64(0); g < 4; g++ {
		s := group(t, db, g)
		if l, _ := s.LastIndex(); l != 50 {
			t.Fatalf("group %d last %d after crash, want 50", g, l)
		}
		if hs := s.HardState(); hs.GetCommit() != 50 {
			t.Fatalf("group %d commit %d after crash", g, hs.GetCommit())
		}
		es, err := s.Entries(50, 51, 100)
		if err != nil || string(es[0].GetData()) != fmt.Sprint(g, 50) {
			t.Fatalf("group %d entry 50: %v %v", g, es, err)
		}
	}
}

// TestFsyncFailureFailsTheStore: a failed fsync is an error, not a crash of
// the process; the store then refuses all writes and no group's state moves.
func TestFsyncFailureFailsTheStore(t *testing.T) {
	for _, mode := range []string{"sync", "write"} {
		t.Run(mode, func(t *testing.T) {
			ffs := NewFaultFS(vfs.NewMem())
			db := openMem(t, ffs)
			s := group(t, db, 1)
			commit(t, db, func(b *Batch) error { return b.Append(s, []*pb.Entry{ent(1, 1, "ok")}) })
			if mode == "sync" {
				ffs.FailSyncs(true)
			} else {
				ffs.FailWrites(true)
			}
			b := db.NewBatch()
			if err := b.Append(s, []*pb.Entry{ent(2, 1, "lost")}); err != nil {
				t.Fatal(err)
			}
			err := b.Commit()
			if !errors.Is(err, ErrFailed) {
				t.Fatalf("commit with failing disk: %v, want ErrFailed", err)
			}
			if ffs.Injected() == 0 {
				t.Fatal("no fault was injected")
			}
			if l, _ := s.LastIndex(); l != 1 {
				t.Fatalf("last index moved to %d on a failed commit", l)
			}
			b = db.NewBatch()
			_ = b.Append(s, []*pb.Entry{ent(2, 1, "again")})
			if err := b.Commit(); !errors.Is(err, ErrFailed) {
				t.Fatalf("commit after failure: %v", err)
			}
			if db.Failed() == nil {
				t.Fatal("store not marked failed")
			}
			if _, err := db.Group(2); !errors.Is(err, ErrFailed) {
				t.Fatalf("group after failure: %v", err)
			}
			_ = db.Close()
		})
	}
}

func TestInitialStateRoundTrip(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs)
	s := group(t, db, 2)
	hs := &pb.HardState{Term: new(uint64(4)), Vote: new(uint64(2)), Commit: new(uint64(0))}
	cs := &pb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{5}}
	commit(t, db, func(b *Batch) error {
		if err := b.SetHardState(s, hs); err != nil {
			return err
		}
		return b.SetConfState(s, 0, cs)
	})
	db.Close()
	db = openMem(t, fs)
	defer db.Close()
	s = group(t, db, 2)
	ghs, gcs, err := s.InitialState()
	if err != nil || !proto.Equal(ghs, hs) || !reflect.DeepEqual(gcs.GetVoters(), cs.GetVoters()) || !reflect.DeepEqual(gcs.GetLearners(), cs.GetLearners()) {
		t.Fatalf("initial state %v %v %v", ghs, gcs, err)
	}
}

// The simulator's -seed flag is accepted here too, so that
// `go test ./cluster/... -run Sim -seed N` works across the packages.
var _ = flag.Uint64("seed", 0, "simulator seed (used by cluster/sim)")

func TestClaimRefusesAnotherNodesDirectory(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs)
	if err := db.Claim("c1", 2); err != nil {
		t.Fatal(err)
	}
	if err := db.Claim("c1", 2); err != nil {
		t.Fatalf("the same node again: %v", err)
	}
	db.Close()
	db = openMem(t, fs)
	defer db.Close()
	for _, c := range []struct {
		cluster string
		node    uint64
	}{{"c1", 3}, {"c2", 2}} {
		err := db.Claim(c.cluster, c.node)
		if !errors.Is(err, ErrIdentity) || !strings.Contains(err.Error(), `node 2 of cluster "c1"`) {
			t.Fatalf("claim as node %d of %s: %v", c.node, c.cluster, err)
		}
	}
}

// TestBatchSetRefusesRaftKeys: a state machine's key written in the raft
// batch (Batch.Set) is refused under the raft prefix, and committed with
// the batch otherwise.
func TestBatchSetRefusesRaftKeys(t *testing.T) {
	db := openMem(t, vfs.NewMem())
	defer db.Close()
	b := db.NewBatch()
	if err := b.Set([]byte("r\x00x"), []byte("v")); err == nil || !strings.Contains(err.Error(), "under the raft prefix") {
		t.Fatalf("Set of a raft key: %v, want a refusal", err)
	}
	if err := b.Set([]byte("Tkey"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	v, closer, err := db.Pebble().Get([]byte("Tkey"))
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	if string(v) != "v" {
		t.Fatalf("Tkey = %q after the commit, want v", v)
	}
}
