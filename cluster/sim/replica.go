package sim

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"tally/cluster"
	"tally/cluster/internal/fault"
	"tally/cluster/raftlog"
	"tally/cluster/replica"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
	"tally/store"
)

// tenant is the tenant of every simulated session.
const tenant = "sim"

// timekeeper is the identity the replicas' ledgers commit lapses and
// deadline facts as.
var timekeeper = ledger.DefaultConfig().Timekeeper

// The replica's open-session cache is kept small, so sessions are closed
// and reopened while the faults run (Config.MaxOpen, IdleClose).
const (
	maxOpen   = 3
	idleClose = 500 * time.Millisecond
)

// crashBeforeSyncPerMille is the chance, during the faults, that a data
// group's batch on a node ends in a crash after it wrote its sessions'
// logs and before their fsync.
const crashBeforeSyncPerMille = 15

// errCrashBeforeSync ends a batch where the simulator crashes its node.
var errCrashBeforeSync = errors.New("sim: crash between the session writes and their fsync")

// tempDir makes the run's directory: on /dev/shm when it is there and
// writable (the session logs are real files, written and fsynced on every
// apply), else in the system's temporary directory.
func tempDir() (string, error) {
	if dir, err := os.MkdirTemp("/dev/shm", "tally-sim-"); err == nil {
		return dir, nil
	}
	dir, err := os.MkdirTemp("", "tally-sim-")
	if err != nil {
		return "", fmt.Errorf("sim: directory for the nodes: %w", err)
	}
	return dir, nil
}

// openReplica opens the node's state machine as a cluster node does: the
// methods every node registers, ledgerservice.Local over the replica's own
// sessions, its ledger directory; with the virtual clock for its session
// cache and the simulator's crash point before a batch's fsync.
func (w *World) openReplica(sn *simNode, db *raftlog.DB) (*replica.SM, error) {
	discard := slog.New(slog.DiscardHandler)
	lc := ledger.DefaultConfig()
	lc.Logger = discard
	var sm *replica.SM
	cfg := replica.Config{
		Root: sn.dir, DB: db, Ledger: lc, Groups: w.opt.Groups,
		Methods: cluster.Methods(func() *replica.SM { return sm }),
		Service: func(s ledgerservice.Sessions) service.Service {
			return ledgerservice.New(s, ledgerservice.Config{Now: func() time.Time { return sm.Now() }, Timekeeper: lc.Timekeeper,
				Root: func() (string, error) { return sn.dir, nil }, RelativeLogs: true, TargetsVerified: true,
				MintExpectationID: func() string { return sm.MintExpectationID() }})
		},
		MaxOpen: maxOpen, IdleClose: idleClose, Clock: w.clock.Now, Fetch: w.fetch(sn),
		Logger: discard,
	}
	var err error
	if sm, err = replica.New(cfg); err != nil {
		return nil, err
	}
	sm.Inject(fault.Replica{BeforeSync: w.beforeSync(sn)})
	return sm, nil
}

// beforeSync is the replica's fault.Replica.BeforeSync: now and then during the
// faults, the node crashes after a batch wrote its sessions' logs and
// before their fsync, the one moment those logs hold writes that are not
// durable.
func (w *World) beforeSync(sn *simNode) func(uint64, map[string]store.Position) error {
	return func(group uint64, before map[string]store.Position) error {
		if w.now >= int64(w.opt.Chaos) || w.rng.IntN(1000) >= crashBeforeSyncPerMille {
			return nil
		}
		w.stats.Unsynced++
		w.mix(11, sn.id, group)
		sn.unsynced = maps.Clone(before)
		return errCrashBeforeSync
	}
}

// loseUnsynced cuts each session log a crashed batch wrote without fsync
// back to a point the seed picks, at or after where the log stood durably
// before the batch: that point, the end of a line the batch wrote, or any
// byte (a torn line). The other sessions' logs were synced by the batch
// that last wrote them, so a crash keeps them whole.
func (w *World) loseUnsynced(sn *simNode) {
	for _, key := range slices.Sorted(maps.Keys(sn.unsynced)) {
		if err := w.cutLog(sn, key, sn.unsynced[key].Offset); err != nil {
			w.fail("crash node %d: session %s: %v", sn.id, key, err)
		}
	}
	sn.unsynced = nil
}

func (w *World) cutLog(sn *simNode, key string, durable int64) error {
	t, s, _ := strings.Cut(key, "/")
	path, err := logPath(sn.dir, t, s)
	if err != nil {
		return err
	}
	log, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) && durable == 0 {
		return nil
	}
	if err != nil {
		return err
	}
	if int64(len(log)) < durable {
		return fmt.Errorf("its log holds %d bytes, short of the %d it held durably", len(log), durable)
	}
	at := w.cutPoint(log, durable)
	if at == int64(len(log)) {
		return nil
	}
	if at > durable && log[at-1] != '\n' {
		w.stats.Torn++
	}
	w.mix(12, sn.id, uint64(at))
	return os.Truncate(path, at)
}

// cutPoint picks where a log keeps its unsynced tail up to: at durable, at
// the end of a line after it, or at any byte from it on.
func (w *World) cutPoint(log []byte, durable int64) int64 {
	size := int64(len(log))
	if size == durable {
		return size
	}
	switch w.rng.IntN(3) {
	case 0:
		return durable
	case 1:
		var ends []int64
		for i := durable; i < size; i++ {
			if log[i] == '\n' {
				ends = append(ends, i+1)
			}
		}
		if len(ends) > 0 {
			return ends[w.rng.IntN(len(ends))]
		}
	}
	return durable + w.rng.Int64N(size-durable+1)
}

// logPath is a session's log in a replica's ledger directory.
func logPath(root, tenant, session string) (string, error) {
	dir, err := store.SessionDir(root, tenant, session)
	if err != nil {
		return "", err
	}
	return store.LogPath(dir), nil
}

// readLog is a session's log on a replica; nothing if it has none.
func readLog(root, session string) ([]byte, error) {
	path, err := logPath(root, tenant, session)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b, err
}

// lines splits a log into its lines, without their newlines.
func lines(log []byte) [][]byte {
	if len(log) == 0 {
		return nil
	}
	return bytes.Split(bytes.TrimSuffix(log, []byte{'\n'}), []byte{'\n'})
}
