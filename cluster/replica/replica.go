// Package replica is a cluster node's state machine (node.StateMachine).
// A data group's committed entries are tally commands (Command): every
// replica runs each one with the same Service code on its own session
// ledgers, at the instant and with the ids its proposer fixed, so each
// replica writes its sessions' logs in the local hash-chained format, byte
// for byte the same everywhere (`tally verify` passes on every node and the
// chain hashes match), and a refusal is decided the same everywhere. The
// meta group's entries keep the membership.
//
// Exactly once: before a batch of a data group runs, the position of every
// session it touches is made durable with the batch's range (the intent);
// after it, the applied index. A crash in between leaves the intent: on
// restart each session is cut back to its recorded position and the batch
// runs again, which writes the same bytes, since it is deterministic.
//
// SM hands each group to one of two state machines: metaSM (meta.go, its
// directory in directory.go) and dataSM (data.go, with its fences and held
// records in place.go, its uploads in upload.go and its snapshots in
// snapshot.go and snapshot_bytes.go). keys.go holds the keys both keep
// beside the raft log.
package replica

import (
	"context"
	"errors"
	"hash/fnv"
	"io/fs"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/cluster/raftlog"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
	"tally/store"
)

// Method runs one command's verb on this replica through the Service: the
// same code on every replica. Its value is the typed result the proposer
// hands back to its caller; its error a refusal (or, wrapping an I/O
// error, a failure that stops the node).
type Method func(ctx context.Context, svc service.Service, c service.Call, doc []byte) (any, error)

// Config configures a replica.
type Config struct {
	// Root is the replica's ledger directory (store.Init): its sessions'
	// logs, in the local format.
	Root string
	// DB is the node's raft store; the replica keeps its applied indexes
	// and the meta group's state beside the raft log.
	DB *raftlog.DB
	// Ledger configures each session's ledger; Now and MintID are the
	// replica's (the proposer's instant and ids).
	Ledger ledger.Config
	// Groups is the number of data groups (ids MetaGroup+1 …).
	Groups int
	// Methods are the commands by name.
	Methods map[string]Method
	// Service makes the Service that runs commands over the replica's
	// sessions (ledgerservice.Local over them).
	Service func(ledgerservice.Sessions) service.Service
	// DirectoryRangeMax and DirectoryRangeSplit lay out the meta group's
	// directory's ranges (directory_ranges.go); zero means the defaults.
	// Every replica of a cluster uses the same (the defaults); tests make
	// them small, so that a few thousand placements span thousands of
	// ranges.
	DirectoryRangeMax, DirectoryRangeSplit int
	// MaxOpen bounds the sessions kept open (each holds a few files): past
	// it the least recently opened are closed once idle for IdleClose. A
	// read holding a session longer than IdleClose after opening it may
	// find it closed and fail. Zero means the defaults.
	MaxOpen   int
	IdleClose time.Duration
	// Clock is the open-session cache's clock (when a session was last
	// opened, which have idled for IdleClose); nil means time.Now. The
	// simulator gives its virtual clock, so closes happen the same on
	// every run of a seed.
	Clock func() time.Time
	// Fetch streams part of a session's log from another node's replica
	// of a group: how a moving session's destination gets its copy
	// (move_data.go). Nil on a node that never receives a move.
	Fetch Fetch
	// OnMembers is told the membership after the meta group changes it,
	// from the node's loop.
	OnMembers func([]Member)
	// Restored, when set, is the instant of the backup whose sessions Root
	// already holds (tally restore): a data group bootstrapped on this node
	// (its initial state, Restore at index 1 without a snapshot) starts
	// from its sessions there rather than from none, and its commands are
	// stamped no earlier than that instant.
	Restored time.Time
	Logger   *slog.Logger
}

// Outcome is what a command did on this replica: the method's value or its
// refusal.
type Outcome struct {
	Value any
	Err   error
}

// SM is the replica: the node's StateMachine, which hands each group's
// calls to the meta group's state machine (metaSM: members, tokens,
// nonces, the directory) or to the data groups' (dataSM: sessions'
// ledgers, uploads, fences). Apply, Applied, Snapshot and Restore are
// called from the node's loop; Open (reads) from any goroutine.
type SM struct {
	*metaSM
	*dataSM
	restores atomic.Uint64
	// metaRestores counts the meta group's snapshots installed.
	metaRestores atomic.Uint64
}

var _ node.StateMachine = (*SM)(nil)

// Inject puts f into the replica, before it applies anything: the
// simulator's crash before a batch's fsync (fault.Replica.BeforeSync).
// No production path calls it; the fault package is the cluster's own.
func (s *SM) Inject(f fault.Replica) { s.dataSM.faults = f }

// New opens a replica over cfg.Root (created if need be).
func New(cfg Config) (*SM, error) {
	if cfg.DB == nil || cfg.Root == "" || cfg.Groups < 1 || cfg.Service == nil {
		return nil, errors.New("replica config: DB, Root, Groups and Service are required")
	}
	if err := store.Init(cfg.Root); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxOpen <= 0 {
		cfg.MaxOpen = DefaultMaxOpen
	}
	if cfg.IdleClose <= 0 {
		cfg.IdleClose = DefaultIdleClose
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	b := base{cfg: cfg, log: cfg.Logger}
	data, err := newData(b)
	if err != nil {
		return nil, err
	}
	meta, err := newMeta(b)
	if err != nil {
		return nil, err
	}
	return &SM{metaSM: meta, dataSM: data}, nil
}

// Applied is the group's durable applied index, after finishing the
// recovery of a batch a crash interrupted.
func (m *SM) Applied(group uint64) (uint64, error) {
	if group == node.MetaGroup {
		return m.metaSM.applied()
	}
	return m.dataSM.applied(group)
}

// Apply runs a batch of one group's entries.
func (m *SM) Apply(group uint64, ents []node.Entry) ([][]byte, error) {
	if group == node.MetaGroup {
		return m.metaSM.apply(ents)
	}
	return m.dataSM.apply(group, ents)
}

// Prepare writes, in the node's raft batch, what a data group's batch must
// have durable before it runs (node.Preparer): its intent.
func (m *SM) Prepare(group uint64, ents []node.Entry, w node.PrepareWriter) error {
	if group == node.MetaGroup {
		return nil
	}
	return m.dataSM.prepare(group, ents, w)
}

var _ node.Preparer = (*SM)(nil)

// Take hands over the outcome of a group's entry applied in its last
// batch, once; the node's loop calls it right after the batch.
func (m *SM) Take(group, index uint64) (Outcome, bool) {
	if group == node.MetaGroup {
		return m.metaSM.take(index)
	}
	return m.dataSM.take(group, index)
}

// Restores counts the snapshots this replica installed with data.
func (m *SM) Restores() uint64 { return m.restores.Load() }

// MetaRestores counts the meta group's snapshots this replica installed.
func (m *SM) MetaRestores() uint64 { return m.metaRestores.Load() }

// GroupOf is a session's default data group, by hash of tenant/session
// over the data groups; the directory's recorded placements override it
// (SM.GroupOf).
func GroupOf(groups int, tenant, session string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(tenant))
	h.Write([]byte{'/'})
	h.Write([]byte(session))
	return node.MetaGroup + 1 + h.Sum64()%uint64(groups)
}

// The default bounds of the open sessions (Config.MaxOpen, IdleClose).
const (
	DefaultMaxOpen   = 1024
	DefaultIdleClose = 30 * time.Second
)

// Operational reports an error that is the replica's own failure (its disk,
// its files) rather than a refusal decided from the log: the node stops
// instead of recording a different outcome than the other replicas.
func Operational(err error) bool {
	var pe *fs.PathError
	var le *os.LinkError
	var errno syscall.Errno
	var ce *store.CorruptError
	return errors.As(err, &pe) || errors.As(err, &le) || errors.As(err, &errno) || errors.As(err, &ce) ||
		errors.Is(err, errLocalCopy) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
