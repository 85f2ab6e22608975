package sim

// Nodes' start, crash and restart.

import (
	"errors"
	"fmt"
	"os"

	"github.com/cockroachdb/pebble/v2/vfs"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/cluster/raftlog"
)

func (w *World) start(sn *simNode) error {
	sn.ffs = raftlog.NewFaultFS(sn.mem)
	db, err := raftlog.Open("/data", raftlog.Options{FS: sn.ffs, MemTableSize: 64 << 10, CacheSize: 256 << 10})
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, err)
	}
	sm, err := w.openReplica(sn, db)
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, errors.Join(err, db.Close()))
	}
	sn.db, sn.sm = db, sm
	cfg := w.cfg
	cfg.ID = sn.id
	var voters []uint64 // none for a node that joins later
	if int(sn.id) <= w.opt.Voters {
		for i := range w.opt.Voters {
			voters = append(voters, uint64(i+1))
		}
	}
	n, err := node.New(cfg, db, sn.sm, &transport{w: w, from: sn.id}, w.clock, func(uint64) []uint64 { return voters }, nil)
	if err != nil {
		return fmt.Errorf("seed %d: node %d: %w", w.opt.Seed, sn.id, errors.Join(err, sm.Close(), db.Close()))
	}
	n.Inject(fault.Faults{SendBeforePersist: w.opt.SendBeforePersist})
	sn.n, sn.up = n, true
	sn.epoch++
	return nil
}

// crash drops the node and every write it had not synced: the raft
// store's, and the unsynced tail of its sessions' logs.
func (w *World) crash(sn *simNode) {
	if !sn.up {
		return
	}
	w.stats.Crashes++
	w.mix(1, sn.id)
	sn.up = false
	sn.epoch++
	crashed := sn.mem.CrashClone(vfs.CrashCloneCfg{})
	closeStore(sn)
	// The sessions' files are closed before their tails are cut, as the
	// process's would be by its death.
	if err := sn.sm.Close(); err != nil {
		w.fail("crash node %d: close its sessions: %v", sn.id, err)
	}
	w.loseUnsynced(sn)
	sn.mem, sn.db, sn.n, sn.sm = crashed, nil, nil, nil
}

// closeStore closes a node's raft store, a failed one too: raftlog leaves
// a failed pebble open (on a dying disk its close could block), but here
// the disk is the simulator's, healed first, and an abandoned store would
// keep its goroutines and memory for the rest of a long sweep.
func closeStore(sn *simNode) {
	if sn.db.Failed() == nil {
		_ = sn.db.Close()
		return
	}
	sn.ffs.FailWrites(false)
	sn.ffs.FailSyncs(false)
	_ = sn.db.Pebble().Close() // it reports the failure it stopped on
}

func (w *World) restart(sn *simNode) {
	if sn.up {
		return
	}
	w.mix(2, sn.id)
	w.liveRestarted(sn)
	if err := w.start(sn); err != nil {
		w.fail("restart: %v", err)
		return
	}
	w.scheduleTick(sn, 0)
	w.scheduleKeep(sn, int64(keepEvery))
	w.custodyRestarted(sn)
}

// closeAll closes every live node and removes the nodes' directories.
func (w *World) closeAll() error {
	for _, sn := range w.nodes {
		if !sn.up {
			continue
		}
		_ = sn.sm.Close()
		closeStore(sn)
	}
	if err := os.RemoveAll(w.dir); err != nil {
		return fmt.Errorf("seed %d: remove the nodes' directories: %w", w.opt.Seed, err)
	}
	return nil
}

func (w *World) upNodes() []*simNode {
	var out []*simNode
	for _, sn := range w.nodes {
		if sn.up {
			out = append(out, sn)
		}
	}
	return out
}
