// Package raftlog keeps the raft state of every group a node hosts in one
// pebble database: each group's entries, HardState, ConfState, truncation
// point and snapshot metadata under its own key prefix. It implements
// raft.Storage per group, and writes go through a Batch that collects the
// writes of several groups and commits them with one fsync, so the groups of
// a node share the disk's group commit.
//
// Reads see only committed batches: between Ready and Advance raft reads the
// entries it has just handed out from its own unstable log, never from
// storage, so a pending batch needs no read-through.
package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// ErrFailed is returned by every operation after a write or fsync of the
// database failed. The database cannot know which of its writes reached the
// disk, so it refuses to go on; recovery is a restart, which replays what was
// synced.
var ErrFailed = errors.New("raftlog: a write to the disk failed earlier; the store refuses further use")

// Key layout. Prefix 'r' is raft state; other prefixes are free for the
// state machine sharing the database (see DB.Pebble).
const (
	prefixRaft  = 'r'
	kindEntry   = 'e'
	kindHard    = 'h'
	kindConf    = 'c'
	kindTrunc   = 't'
	kindSnap    = 's'
	groupKeyLen = 1 + 8 + 1
)

func groupKey(group uint64, kind byte) []byte {
	k := make([]byte, groupKeyLen, groupKeyLen+8)
	k[0] = prefixRaft
	binary.BigEndian.PutUint64(k[1:9], group)
	k[9] = kind
	return k
}

func entryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey(group, kindEntry), index)
}

// Options configure Open.
type Options struct {
	// FS is the file system; nil means the real disk. Tests and the simulator
	// pass vfs.NewMem, vfs.NewCrashableMem or a fault-injecting wrapper.
	FS vfs.FS
	// MemTableSize bounds pebble's memtable; zero keeps pebble's default.
	MemTableSize uint64
	// CacheSize is pebble's block cache, in bytes; zero keeps pebble's
	// default (the simulator, opening many small stores, asks for less).
	CacheSize int64
	// Logger receives pebble's informational messages; nil discards them.
	// Its errors are logged once, then counted (repeats).
	Logger *slog.Logger
	// FreeMin is the space the store's file system must have free for it
	// to open (ENOSPC otherwise); 0 asks nothing.
	FreeMin uint64
	// OnBackgroundError hears each of pebble's background errors (a flush
	// or a compaction that failed), from pebble's goroutine.
	OnBackgroundError func(error)
}

// DB is one node's raft store.
type DB struct {
	pdb *pebble.DB

	mu     sync.Mutex
	failed error
	groups map[uint64]*Storage
}

// fatalPanic carries pebble's Fatalf out of its commit path so that a disk
// error becomes an error value here instead of ending the process.
type fatalPanic struct{ msg string }

type pebbleLogger struct {
	l      *slog.Logger
	errors *repeats
}

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l != nil {
		p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.errors.errorf(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	panic(fatalPanic{msg: fmt.Sprintf(format, args...)})
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*DB, error) {
	d := &DB{groups: make(map[uint64]*Storage)}
	errs := newRepeats(o.Logger)
	po := &pebble.Options{
		FS:            o.FS,
		Logger:        pebbleLogger{l: o.Logger, errors: errs},
		EventListener: d.listener(errs, o.OnBackgroundError),
		MemTableSize:  o.MemTableSize,
	}
	if o.CacheSize > 0 {
		c := pebble.NewCache(o.CacheSize)
		defer c.Unref() // the database holds its own reference
		po.Cache = c
	}
	if po.FS == nil {
		po.FS = vfs.Default
	}
	if err := checkFree(po.FS, dir, o.FreeMin); err != nil {
		return nil, err
	}
	pdb, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("raftlog: open %s: %w", dir, err)
	}
	d.pdb = pdb
	// A full disk that failed the flushes of what the log held, and then
	// let one through, stopped nothing: no write of this store was lost
	// or taken. The store starts whole.
	d.failed = nil
	return d, nil
}

// Close closes the database. After a failure it only drops the handle:
// pebble's commit pipeline is broken then and closing it could block.
func (d *DB) Close() error {
	d.mu.Lock()
	failed := d.failed
	d.mu.Unlock()
	if failed != nil {
		return nil
	}
	if err := d.pdb.Close(); err != nil {
		return fmt.Errorf("raftlog: close: %w", err)
	}
	return nil
}

// Failed reports the write error that stopped the store, or nil.
func (d *DB) Failed() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed
}

// identityKey holds the cluster and node this store belongs to.
var identityKey = []byte{prefixRaft, 0, 'i'}

// ErrIdentity is returned when a store belongs to another node or cluster.
var ErrIdentity = errors.New("raftlog: the data directory belongs to another node or cluster")

// Claim records which cluster and node own the store the first time, and
// refuses ever after to be opened as another: a node restarted on another
// node's data directory would otherwise vote and acknowledge as that node.
func (d *DB) Claim(cluster string, node uint64) error {
	want := binary.BigEndian.AppendUint64(nil, node)
	want = append(want, cluster...)
	got, ok, err := d.get(identityKey)
	if err != nil {
		return fmt.Errorf("raftlog: read identity: %w", err)
	}
	if ok {
		if string(got) != string(want) || len(got) < 8 {
			gotNode := uint64(0)
			if len(got) >= 8 {
				gotNode = binary.BigEndian.Uint64(got[:8])
			}
			return fmt.Errorf("%w: it is node %d of cluster %q, not node %d of cluster %q", ErrIdentity, gotNode, got[min(8, len(got)):], node, cluster)
		}
		return nil
	}
	b := d.pdb.NewBatch()
	if err := b.Set(identityKey, want, nil); err != nil {
		b.Close()
		return err
	}
	if err := d.Commit(b, true); err != nil {
		return err
	}
	return b.Close()
}

// Pebble returns the underlying database for a state machine that keeps its
// own state beside the raft log (keys must not start with 'r'). Write to it
// with Commit so that a disk error fails this store the same way.
func (d *DB) Pebble() *pebble.DB { return d.pdb }

// Commit commits a pebble batch, turning pebble's fatal commit errors into a
// failed store and an error.
func (d *DB) Commit(b *pebble.Batch, sync bool) error {
	opt := pebble.NoSync
	if sync {
		opt = pebble.Sync
	}
	return d.guard("commit", func() error { return b.Commit(opt) })
}

// SyncWAL makes every write committed so far durable.
func (d *DB) SyncWAL() error {
	return d.guard("sync", func() error { return d.pdb.LogData(nil, pebble.Sync) })
}

// guard runs a write, failing the store if it errs or pebble reports it
// fatal.
func (d *DB) guard(what string, f func() error) (err error) {
	d.mu.Lock()
	failed := d.failed
	d.mu.Unlock()
	if failed != nil {
		return ErrFailed
	}
	defer func() {
		if r := recover(); r != nil {
			fp, ok := r.(fatalPanic)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("raftlog: %s: %s: %w", what, fp.msg, ErrFailed)
		}
		if err != nil {
			d.mu.Lock()
			if d.failed == nil {
				d.failed = err
			}
			d.mu.Unlock()
		}
	}()
	if err := f(); err != nil {
		return fmt.Errorf("raftlog: %s: %w: %w", what, err, ErrFailed)
	}
	return nil
}

// groupState is the part of a group's state kept in memory: the bounds of
// its log and its small records.
type groupState struct {
	hard       *pb.HardState
	conf       *pb.ConfState
	confIndex  uint64
	truncIndex uint64 // last index removed from the log (snapshot or compaction)
	truncTerm  uint64
	last       uint64
	snap       *pb.SnapshotMetadata
	// terms[k] is the term of entry truncIndex+1+k: raft asks for terms far
	// more often than for entries, so they stay in memory (8 bytes an
	// entry, bounded by compaction). Only Commit changes it, under mu.
	terms []uint64
}

// Storage is one group's raft.Storage.
type Storage struct {
	db    *DB
	group uint64

	mu sync.Mutex
	st groupState
}

var _ raft.Storage = (*Storage)(nil)

// Group loads (or creates, empty) the storage of one group.
func (d *DB) Group(id uint64) (*Storage, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failed != nil {
		return nil, ErrFailed
	}
	if s, ok := d.groups[id]; ok {
		return s, nil
	}
	st := groupState{hard: &pb.HardState{}, conf: &pb.ConfState{}, snap: pb.EnsureSnapshotMetadata(nil)}
	if err := d.getProto(groupKey(id, kindHard), st.hard); err != nil {
		return nil, fmt.Errorf("raftlog: group %d hard state: %w", id, err)
	}
	if err := d.getProto(groupKey(id, kindSnap), st.snap); err != nil {
		return nil, fmt.Errorf("raftlog: group %d snapshot: %w", id, err)
	}
	v, ok, err := d.get(groupKey(id, kindTrunc))
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d truncation: %w", id, err)
	}
	if ok {
		if len(v) != 16 {
			return nil, fmt.Errorf("raftlog: group %d truncation record is %d bytes, want 16", id, len(v))
		}
		st.truncIndex = binary.BigEndian.Uint64(v[:8])
		st.truncTerm = binary.BigEndian.Uint64(v[8:])
	}
	v, ok, err = d.get(groupKey(id, kindConf))
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d conf state: %w", id, err)
	}
	if ok {
		if len(v) < 8 {
			return nil, fmt.Errorf("raftlog: group %d conf state record is %d bytes, want at least 8", id, len(v))
		}
		st.confIndex = binary.BigEndian.Uint64(v[:8])
		if err := proto.Unmarshal(v[8:], st.conf); err != nil {
			return nil, fmt.Errorf("raftlog: group %d conf state: %w", id, err)
		}
	}
	st.last = st.truncIndex
	it, err := d.pdb.NewIter(&pebble.IterOptions{LowerBound: entryKey(id, st.truncIndex+1), UpperBound: groupKey(id, kindEntry+1)})
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d: %w", id, err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		idx := binary.BigEndian.Uint64(it.Key()[groupKeyLen:])
		if idx != st.last+1 || len(it.Value()) < 8 {
			_ = it.Close()
			return nil, fmt.Errorf("raftlog: group %d: entry %d missing or short in the log", id, st.last+1)
		}
		st.terms = append(st.terms, binary.BigEndian.Uint64(it.Value()[:8]))
		st.last = idx
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("raftlog: group %d: %w", id, err)
	}
	if st.last < st.truncIndex {
		return nil, fmt.Errorf("raftlog: group %d: last index %d below truncation %d", id, st.last, st.truncIndex)
	}
	s := &Storage{db: d, group: id, st: st}
	d.groups[id] = s
	return s, nil
}

func (d *DB) get(key []byte) ([]byte, bool, error) {
	v, closer, err := d.pdb.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := append([]byte(nil), v...)
	if err := closer.Close(); err != nil {
		return nil, false, err
	}
	return out, true, nil
}

func (d *DB) getProto(key []byte, m proto.Message) error {
	v, ok, err := d.get(key)
	if err != nil || !ok {
		return err
	}
	return proto.Unmarshal(v, m)
}

func (s *Storage) snapshotState() groupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// ID is the group's id.
func (s *Storage) ID() uint64 { return s.group }

// InitialState returns the saved HardState and ConfState.
func (s *Storage) InitialState() (*pb.HardState, *pb.ConfState, error) {
	st := s.snapshotState()
	return proto.Clone(st.hard).(*pb.HardState), pb.EnsureConfState(proto.Clone(st.conf).(*pb.ConfState)), nil
}

// ConfIndex is the index of the entry whose application produced the saved
// ConfState (the snapshot index after a snapshot). A restart must have raft
// re-deliver every entry after it so conf changes are applied again.
func (s *Storage) ConfIndex() uint64 { return s.snapshotState().confIndex }

// HardState returns the saved HardState.
func (s *Storage) HardState() *pb.HardState {
	return proto.Clone(s.snapshotState().hard).(*pb.HardState)
}

// Entries returns entries [lo, hi), at most maxSize bytes of them but always
// at least one.
func (s *Storage) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	st := s.snapshotState()
	if lo <= st.truncIndex {
		return nil, raft.ErrCompacted
	}
	if hi > st.last+1 {
		return nil, fmt.Errorf("raftlog: group %d: entries hi %d beyond last index %d", s.group, hi, st.last)
	}
	if st.last == st.truncIndex {
		return nil, raft.ErrUnavailable
	}
	if lo >= hi {
		return nil, nil
	}
	if err := s.db.Failed(); err != nil {
		return nil, ErrFailed
	}
	it, err := s.db.pdb.NewIter(&pebble.IterOptions{LowerBound: entryKey(s.group, lo), UpperBound: entryKey(s.group, hi)})
	if err != nil {
		return nil, fmt.Errorf("raftlog: group %d entries: %w", s.group, err)
	}
	var out []*pb.Entry
	var size uint64
	want := lo
	for ok := it.First(); ok; ok = it.Next() {
		idx := binary.BigEndian.Uint64(it.Key()[groupKeyLen:])
		if idx != want {
			_ = it.Close()
			return nil, fmt.Errorf("raftlog: group %d: entry %d missing: %w", s.group, want, raft.ErrUnavailable)
		}
		v := it.Value()
		e := &pb.Entry{}
		if len(v) < 8 {
			_ = it.Close()
			return nil, fmt.Errorf("raftlog: group %d entry %d: record too short", s.group, idx)
		}
		if err := proto.Unmarshal(v[8:], e); err != nil {
			_ = it.Close()
			return nil, fmt.Errorf("raftlog: group %d entry %d: %w", s.group, idx, err)
		}
		size += uint64(len(v) - 8) // what proto.Size(e) would count again
		if len(out) > 0 && size > maxSize {
			break
		}
		out = append(out, e)
		want++
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("raftlog: group %d entries: %w", s.group, err)
	}
	if len(out) == 0 || (want < hi && size <= maxSize) {
		return nil, fmt.Errorf("raftlog: group %d: entry %d missing: %w", s.group, want, raft.ErrUnavailable)
	}
	return out, nil
}

// Term returns the term of entry i.
func (s *Storage) Term(i uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &s.st
	if i < st.truncIndex {
		return 0, raft.ErrCompacted
	}
	if i == st.truncIndex {
		return st.truncTerm, nil
	}
	if i > st.last {
		return 0, raft.ErrUnavailable
	}
	return st.terms[i-st.truncIndex-1], nil
}

// LastIndex is the index of the last entry in the log.
func (s *Storage) LastIndex() (uint64, error) { return s.snapshotState().last, nil }

// FirstIndex is the index of the first entry still in the log.
func (s *Storage) FirstIndex() (uint64, error) { return s.snapshotState().truncIndex + 1, nil }

// Snapshot returns the latest snapshot's metadata. Its data is the state
// machine's, which the node streams itself; this store holds only metadata.
func (s *Storage) Snapshot() (*pb.Snapshot, error) {
	st := s.snapshotState()
	return &pb.Snapshot{Metadata: proto.Clone(st.snap).(*pb.SnapshotMetadata)}, nil
}
