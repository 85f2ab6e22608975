package store

import (
	"fmt"
	"time"
)

// CommitConfig tunes a Pipeline. Start from DefaultCommitConfig.
type CommitConfig struct {
	// CheckpointMin is the fewest lines since the last checkpoint that make
	// a new one worth writing. The threshold also grows with the log, so
	// checkpoint cost stays amortised O(1) per line: at open and close, one
	// eighth of the lines the last checkpoint covered (so an open folds at
	// most about a ninth of the log); in a process that keeps the ledger
	// open and writes (a server), one half, since its state is already in
	// memory and encoding one holds up the writers.
	CheckpointMin uint64
	// BatchMax bounds the commands one group commit carries.
	BatchMax int
	// QueueMax bounds the commands waiting to be decided. A writer that
	// finds the queue full waits for room until its context ends, and is
	// then refused with nothing appended; once queued, a command is always
	// carried through (LockTimeout bounds it).
	QueueMax int
	// CohortWait bounds how long, after an fsync, the syncer waits for the
	// writers it just acknowledged to come back and be decided, so they
	// share the next fsync with the batches already waiting instead of
	// forming a cohort of their own (zero: no wait). It never waits longer
	// than twice the last fsync took: a wait worth about the fsync it saves
	// (writers over HTTP come back more slowly than in-process ones).
	CohortWait time.Duration
	// LockTimeout bounds the wait for another process's append.
	LockTimeout time.Duration
	// Observe, if set, is told about every commit (for metrics).
	Observe func(CommitInfo)
}

// DefaultCommitConfig returns the configuration the CLI and server use.
func DefaultCommitConfig() CommitConfig {
	return CommitConfig{
		CheckpointMin: 2048, BatchMax: 1024, QueueMax: 4096,
		CohortWait: 2 * time.Millisecond, LockTimeout: 30 * time.Second,
	}
}

// Validate reports a configuration that cannot work, quoting the value.
func (c CommitConfig) Validate() error {
	switch {
	case c.CohortWait < 0:
		return fmt.Errorf("CohortWait %v must not be negative", c.CohortWait)
	case c.BatchMax < 1:
		return fmt.Errorf("BatchMax %d must be at least 1", c.BatchMax)
	case c.QueueMax < 1:
		return fmt.Errorf("QueueMax %d must be at least 1", c.QueueMax)
	case c.CheckpointMin < 1:
		return fmt.Errorf("CheckpointMin %d must be at least 1", c.CheckpointMin)
	case c.LockTimeout <= 0:
		return fmt.Errorf("LockTimeout %v must be positive", c.LockTimeout)
	}
	return nil
}
