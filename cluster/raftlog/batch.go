package raftlog

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Batch collects the writes of one loop iteration, for any number of groups,
// and commits them atomically with one fsync. Groups' in-memory state moves
// only when Commit succeeds.
type Batch struct {
	db      *DB
	b       *pebble.Batch
	pending map[*Storage]*groupState
	order   []*Storage // groups in first-touch order, so Commit is deterministic
	termOps map[*Storage][]termOp
	scratch []byte // an entry's key and value, as Append builds them
}

// termOp is a change to a group's in-memory terms, replayed at Commit.
type termOp struct {
	kind  byte // 'a' append at index, 'c' compact through index, 'r' reset to index
	index uint64
	terms []uint64
}

func replayTerms(terms []uint64, base uint64, ops []termOp) []uint64 {
	for _, op := range ops {
		switch op.kind {
		case 'a':
			terms = append(terms[:op.index-base-1], op.terms...)
		case 'c':
			terms = append([]uint64(nil), terms[op.index-base:]...)
			base = op.index
		case 'r':
			terms, base = nil, op.index
		}
	}
	return terms
}

// NewBatch starts a batch.
func (d *DB) NewBatch() *Batch {
	// Not an indexed batch: nothing reads it before it commits (terms come
	// from memory), and an index costs a skiplist insert a write.
	return &Batch{db: d, b: d.pdb.NewBatch(), pending: make(map[*Storage]*groupState), termOps: make(map[*Storage][]termOp)}
}

func (b *Batch) state(s *Storage) *groupState {
	if st, ok := b.pending[s]; ok {
		return st
	}
	c := s.snapshotState()
	c.terms = nil // changed only through termOps
	b.pending[s] = &c
	b.order = append(b.order, s)
	return &c
}

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Len is the batch's encoded size in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Append writes entries to a group's log. Writing entry i discards every
// persisted entry at or after i, as raft requires when a new leader
// overwrites an uncommitted suffix. Entries at or before the truncation
// point are ignored.
func (b *Batch) Append(s *Storage, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	st := b.state(s)
	first := st.truncIndex + 1
	lastNew := ents[0].GetIndex() + uint64(len(ents)) - 1
	if lastNew < first {
		return nil
	}
	if ents[0].GetIndex() < first {
		ents = ents[first-ents[0].GetIndex():]
	}
	start := ents[0].GetIndex()
	if start > st.last+1 {
		return fmt.Errorf("raftlog: group %d: append at %d leaves a gap after last index %d", s.group, start, st.last)
	}
	for i, e := range ents {
		if e.GetIndex() != start+uint64(i) {
			return fmt.Errorf("raftlog: group %d: entries not contiguous at %d", s.group, e.GetIndex())
		}
	}
	if start <= st.last {
		if err := b.b.DeleteRange(entryKey(s.group, start), entryKey(s.group, st.last+1), nil); err != nil {
			return fmt.Errorf("raftlog: group %d truncate suffix: %w", s.group, err)
		}
	}
	op := termOp{kind: 'a', index: start, terms: make([]uint64, 0, len(ents))}
	// The batch copies each key and value: both are built in one buffer
	// kept for the batch.
	for _, e := range ents {
		op.terms = append(op.terms, e.GetTerm())
		buf := binary.BigEndian.AppendUint64(append(b.scratch[:0], prefixRaft), s.group)
		buf = binary.BigEndian.AppendUint64(append(buf, kindEntry), e.GetIndex())
		keyLen := len(buf)
		buf = binary.BigEndian.AppendUint64(buf, e.GetTerm())
		buf, err := proto.MarshalOptions{}.MarshalAppend(buf, e)
		if err != nil {
			return fmt.Errorf("raftlog: group %d entry %d: %w", s.group, e.GetIndex(), err)
		}
		b.scratch = buf
		if err := b.b.Set(buf[:keyLen], buf[keyLen:], nil); err != nil {
			return fmt.Errorf("raftlog: group %d entry %d: %w", s.group, e.GetIndex(), err)
		}
	}
	st.last = lastNew
	b.termOps[s] = append(b.termOps[s], op)
	return nil
}

// Set writes a key of the state machine's (not under the raft prefix) in
// the batch, so it is durable with the raft writes of the same iteration.
func (b *Batch) Set(key, value []byte) error {
	if len(key) == 0 || key[0] == prefixRaft {
		return fmt.Errorf("raftlog: key %q is under the raft prefix %q", key, prefixRaft)
	}
	return b.b.Set(key, value, nil)
}

// SetHardState records a group's HardState. An empty one is ignored.
func (b *Batch) SetHardState(s *Storage, hs *pb.HardState) error {
	if hs == nil || raft.IsEmptyHardState(hs) {
		return nil
	}
	data, err := proto.Marshal(hs)
	if err != nil {
		return fmt.Errorf("raftlog: group %d hard state: %w", s.group, err)
	}
	if err := b.b.Set(groupKey(s.group, kindHard), data, nil); err != nil {
		return fmt.Errorf("raftlog: group %d hard state: %w", s.group, err)
	}
	b.state(s).hard = proto.Clone(hs).(*pb.HardState)
	return nil
}

// SetConfState records the configuration in force after applying the entry
// at index.
func (b *Batch) SetConfState(s *Storage, index uint64, cs *pb.ConfState) error {
	data, err := proto.Marshal(cs)
	if err != nil {
		return fmt.Errorf("raftlog: group %d conf state: %w", s.group, err)
	}
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(data)), index)
	if err := b.b.Set(groupKey(s.group, kindConf), append(v, data...), nil); err != nil {
		return fmt.Errorf("raftlog: group %d conf state: %w", s.group, err)
	}
	st := b.state(s)
	st.conf = proto.Clone(cs).(*pb.ConfState)
	st.confIndex = index
	return nil
}

func (b *Batch) setTrunc(s *Storage, st *groupState, index, term uint64) error {
	v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, index), term)
	if err := b.b.Set(groupKey(s.group, kindTrunc), v, nil); err != nil {
		return fmt.Errorf("raftlog: group %d truncation: %w", s.group, err)
	}
	st.truncIndex, st.truncTerm = index, term
	return nil
}

func (b *Batch) setSnap(s *Storage, st *groupState, md *pb.SnapshotMetadata) error {
	data, err := proto.Marshal(md)
	if err != nil {
		return fmt.Errorf("raftlog: group %d snapshot: %w", s.group, err)
	}
	if err := b.b.Set(groupKey(s.group, kindSnap), data, nil); err != nil {
		return fmt.Errorf("raftlog: group %d snapshot: %w", s.group, err)
	}
	st.snap = proto.Clone(md).(*pb.SnapshotMetadata)
	return nil
}

// ApplySnapshot replaces a group's log with an installed snapshot: every
// entry goes, the snapshot's index becomes the truncation point and its
// ConfState the saved configuration. An older snapshot than the one held is
// refused with raft.ErrSnapOutOfDate.
func (b *Batch) ApplySnapshot(s *Storage, snap *pb.Snapshot) error {
	md := pb.EnsureSnapshotMetadata(proto.Clone(snap.GetMetadata()).(*pb.SnapshotMetadata))
	st := b.state(s)
	if st.snap.GetIndex() != 0 && st.snap.GetIndex() >= md.GetIndex() {
		return raft.ErrSnapOutOfDate
	}
	if err := b.b.DeleteRange(entryKey(s.group, 0), groupKey(s.group, kindEntry+1), nil); err != nil {
		return fmt.Errorf("raftlog: group %d clear log: %w", s.group, err)
	}
	if err := b.setSnap(s, st, md); err != nil {
		return err
	}
	if err := b.setTrunc(s, st, md.GetIndex(), md.GetTerm()); err != nil {
		return err
	}
	st.last = md.GetIndex()
	b.termOps[s] = append(b.termOps[s], termOp{kind: 'r', index: md.GetIndex()})
	return b.SetConfState(s, md.GetIndex(), md.GetConfState())
}

// CreateSnapshot records snapshot metadata at index i (which must be in the
// log) with configuration cs. An index not after the held snapshot's is
// refused with raft.ErrSnapOutOfDate.
func (b *Batch) CreateSnapshot(s *Storage, i uint64, cs *pb.ConfState) error {
	st := b.state(s)
	if i <= st.snap.GetIndex() {
		return raft.ErrSnapOutOfDate
	}
	if i > st.last {
		return fmt.Errorf("raftlog: group %d: snapshot %d beyond last index %d", s.group, i, st.last)
	}
	term, err := b.termPending(s, st, i)
	if err != nil {
		return err
	}
	return b.setSnap(s, st, &pb.SnapshotMetadata{Index: new(i), Term: new(term), ConfState: pb.EnsureConfState(proto.Clone(cs).(*pb.ConfState))})
}

// Compact removes entries up to and including i; FirstIndex becomes i+1 and
// Term(i) stays answerable. Compacting at or before the truncation point is
// raft.ErrCompacted.
func (b *Batch) Compact(s *Storage, i uint64) error {
	st := b.state(s)
	if i <= st.truncIndex {
		return raft.ErrCompacted
	}
	if i > st.last {
		return fmt.Errorf("raftlog: group %d: compact %d beyond last index %d", s.group, i, st.last)
	}
	term, err := b.termPending(s, st, i)
	if err != nil {
		return err
	}
	if err := b.b.DeleteRange(entryKey(s.group, 0), entryKey(s.group, i+1), nil); err != nil {
		return fmt.Errorf("raftlog: group %d compact: %w", s.group, err)
	}
	b.termOps[s] = append(b.termOps[s], termOp{kind: 'c', index: i})
	return b.setTrunc(s, st, i, term)
}

// termPending is a term as the batch leaves it: the group's terms in
// memory with the batch's changes to them replayed (compactions and
// snapshots, which ask, are rare).
func (b *Batch) termPending(s *Storage, st *groupState, i uint64) (uint64, error) {
	if i == st.truncIndex {
		return st.truncTerm, nil
	}
	s.mu.Lock()
	terms := replayTerms(slices.Clone(s.st.terms), s.st.truncIndex, b.termOps[s])
	s.mu.Unlock()
	if i < st.truncIndex || i-st.truncIndex > uint64(len(terms)) {
		return 0, fmt.Errorf("raftlog: group %d term %d: not in the log (%d after %d)", s.group, i, len(terms), st.truncIndex)
	}
	return terms[i-st.truncIndex-1], nil
}

// Commit writes the batch with one fsync, then publishes the new state of
// every group it touched. On error the store is failed (see ErrFailed) and
// no group's state moves.
func (b *Batch) Commit() error { return b.commit(true) }

// CommitNoSync commits without fsync and publishes the state as if it were
// durable. Raft forbids this (a crash loses what peers were told); it exists
// only so a test can break that rule on purpose.
func (b *Batch) CommitNoSync() error { return b.commit(false) }

func (b *Batch) commit(sync bool) error {
	if b.b.Empty() {
		return b.Close()
	}
	if err := b.db.Commit(b.b, sync); err != nil {
		return err
	}
	for _, s := range b.order {
		st := b.pending[s]
		s.mu.Lock()
		st.terms = replayTerms(s.st.terms, s.st.truncIndex, b.termOps[s])
		s.st = *st
		s.mu.Unlock()
	}
	b.pending, b.order = nil, nil
	return b.Close()
}

// Close releases the batch; after a failed Commit it only drops it, as
// pebble may still hold it.
func (b *Batch) Close() error {
	if b.b == nil || b.db.Failed() != nil {
		return nil
	}
	err := b.b.Close()
	b.b = nil
	if err != nil {
		return fmt.Errorf("raftlog: close batch: %w", err)
	}
	return nil
}
