package raftlog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
)

// BenchmarkAppendCommit is one loop iteration's raft writes on a replica:
// 16 entries of a 300-byte command and the HardState, in one batch,
// committed (on an in-memory file system, so the figures are the CPU and
// allocations of the store, not the disk); then raft's read of the same
// entries for a follower's append. Per op: one iteration.
func BenchmarkAppendCommit(b *testing.B) {
	db, err := Open("/db", Options{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, err := db.Group(2)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 300)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	const per = 16
	ents := make([]*pb.Entry, per)
	next := uint64(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range ents {
			ents[k] = &pb.Entry{Index: new(next + uint64(k)), Term: new(uint64(1)), Type: new(pb.EntryType_EntryNormal), Data: data}
		}
		batch := db.NewBatch()
		if err := batch.Append(s, ents); err != nil {
			b.Fatal(err)
		}
		if err := batch.SetHardState(s, &pb.HardState{Term: new(uint64(1)), Commit: new(next + per - 1)}); err != nil {
			b.Fatal(err)
		}
		if err := batch.CommitNoSync(); err != nil {
			b.Fatal(err)
		}
		got, err := s.Entries(next, next+per, 1<<20)
		if err != nil || len(got) != per {
			b.Fatalf("entries: %d, %v", len(got), err)
		}
		next += per
	}
}
