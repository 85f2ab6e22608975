package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// The group commit: a Pipeline carries writes from many goroutines into one
// session log, deciding them in batches under one lock and sharing one fsync
// among every batch written before it, while it keeps a Machine (the folded
// state) in step with the log. What it needs of the log and of the state is
// written down as the small interfaces below, each method with its contract.
//
// Each of its jobs has a file: its configuration (pipeline_config.go), the
// queue and the committer (pipeline_queue.go), deciding and writing a batch
// (pipeline_write.go), the syncer that makes batches durable and
// acknowledges them (pipeline_sync.go), folding the log into the state
// (pipeline_fold.go), reads that wait for durability (pipeline_read.go),
// checkpoints (pipeline_checkpoint.go) and recovery from a failed write or
// fsync (pipeline_recover.go).

// LogWriter is what the pipeline needs to append to a log.
type LogWriter interface {
	// Begin takes the log's exclusive append lock (in this process and
	// across processes), waiting for other writers until ctx ends. The
	// caller must CatchUp before it appends, and Release when done.
	Begin(ctx context.Context) (*Tx, error)
	// Sync makes everything written so far durable. It needs no lock and may
	// run while a Tx writes further lines; it covers every line whose Write
	// returned before it was called, and says nothing about later ones.
	Sync() error
	// Contended reports whether a writer in any process waits for the lock
	// this process holds. It has no side effect.
	Contended() bool
}

// LogReader is what the pipeline needs to fold a log it does not write.
type LogReader interface {
	// Scan verifies every whole line after from and hands it to fn, in
	// order; it returns the position after the last line handed over, a
	// torn final line (nil if none; it is not an error) and the first error
	// of the log or of fn, which stops the scan. It takes no lock.
	Scan(from Position, fn func(Entry) error) (Position, *Torn, error)
}

// CheckpointStore is what the pipeline needs to keep checkpoints.
type CheckpointStore interface {
	// ReadCheckpointAsync returns the last checkpoint written (ErrNoCheckpoint
	// if none matches the log) and a verify function the caller must call,
	// once, before it trusts payload: it reports a checksum that does not
	// hold. The payload may share memory with the file; it stays valid until
	// the log is closed.
	ReadCheckpointAsync() (Position, []byte, func() error, error)
	// WriteCheckpointFrom replaces the checkpoint with the one encode emits,
	// for the log at pos, durably; the old one stays if it fails. It returns
	// the bytes written.
	WriteCheckpointFrom(pos Position, encode func(emit func([]byte) error) error) (int64, error)
}

// SessionLog is everything a Pipeline needs of its log.
type SessionLog interface {
	LogWriter
	LogReader
	CheckpointStore
}

var (
	_ LogWriter       = (*Log)(nil)
	_ LogReader       = (*Log)(nil)
	_ CheckpointStore = (*Log)(nil)
	_ SessionLog      = (*Log)(nil)
	_ Appender        = (*Tx)(nil)
)

// Appender is what a Machine may do to the transaction while it decides a
// batch: append records after the log's last and look at what it appended.
type Appender interface {
	// Grow makes room in the buffer for n more bytes of lines.
	Grow(n int)
	// Append adds a record after the last one and returns its sequence
	// number. It fails only for a record over LineMax, before anything of
	// it is buffered.
	Append(r Record) (uint64, error)
	// Lines returns the lines appended and not yet written, each with its
	// newline; the last one is the last record appended. The caller must
	// not keep or change it.
	Lines() []byte
	// Pending is the log's position after the lines appended so far.
	Pending() Position
}

// Request is one write queued on a Pipeline. The caller's own type carries
// the command; the pipeline only hands it to Machine.Decide and tells the
// writer how it ended.
type Request interface {
	// Settle ends the request and tells its writer; it is called exactly
	// once for every request Submit accepted, from any goroutine. With err
	// nil the records Decide appended for it (if any) are durable. Otherwise
	// none of them is in the log and err says why: with keep, a request
	// Decide refused keeps its refusal (it appended nothing, so the failure
	// of its batch does not concern it); without, err replaces any outcome
	// (the state it was decided against was found broken).
	Settle(err error, keep bool)
	// Settled reports whether Settle has run.
	Settled() bool
}

// Machine is the state a Pipeline keeps in step with its log: it decides
// requests, folds records and encodes checkpoints. Every method but
// Snapshot's Encode is called with the pipeline's lock held, so a Machine
// needs no lock of its own, and none of them may block on the pipeline.
type Machine interface {
	// Reset empties the state: it has folded nothing.
	Reset()
	// Restore replaces the state with a checkpoint's payload (what a
	// Snapshot encoded), which need not be verified yet: on error, or if
	// the payload's checksum then fails, the pipeline calls Reset.
	Restore(payload []byte) error
	// Apply folds one verified line that the machine did not decide: on
	// open, or appended by another process. An error is damage the
	// pipeline reports; the state may then hold part of the line, and is
	// reset before the next use.
	Apply(e Entry) error
	// Decide decides every request of batch, in order, against the state
	// with every earlier request applied: it appends the records each
	// produces to tx, folds them, and records each request's own outcome
	// (a refusal, a result) in the request; it must not Settle any. It
	// returns the records appended that count as results (for Stats) and
	// the requests refused. A panic is a broken invariant: the pipeline
	// drops the batch's lines, fails the batch and rebuilds the state.
	Decide(tx Appender, batch []Request) (appended, refused int)
	// Snapshot captures the state for a checkpoint. Unless frozen, Encode
	// runs at once, under the lock; frozen, Encode runs after the lock is
	// released, while the state goes on changing, so the snapshot must not
	// see those changes. Release is called, under the lock, once Encode
	// has returned.
	Snapshot(frozen bool) Snapshot
}

// Snapshot is a state captured for a checkpoint.
type Snapshot interface {
	// Encode streams the checkpoint payload to emit, in chunks; it returns
	// emit's first error.
	Encode(emit func([]byte) error) error
	// Release frees what the snapshot holds. Called with the lock held.
	Release()
}

// CommitInfo describes one group commit.
type CommitInfo struct {
	Requests int           // commands in the batch
	Records  int           // lines appended
	Fsync    time.Duration // write + fsync time
}

// Stats counts what a pipeline has done since it was made.
type Stats struct {
	Commits  uint64 // fsynced transactions
	Appended uint64 // records appended
	Refused  uint64 // commands refused by a rule
}

// Pipeline is the group commit of one session log. It is safe for
// concurrent use.
//
// Writes are pipelined in two stages. The committer decides a batch under mu
// (against the state with every earlier batch applied) and hands it to the
// syncer; while an fsync runs, the batches decided wait in the tx's buffer,
// and the syncer writes them all right before its next fsync (a write
// during an fsync slows that fsync down). One fsync makes everything
// written durable and only then are the batches it covered acknowledged. The
// state may therefore be ahead of the disk by what awaits an fsync: readers
// (Read, Position, checkpoints) wait until it is not, so nobody in this
// process sees a record before it is durable.
type Pipeline struct {
	cfg    CommitConfig
	log    SessionLog
	m      Machine
	logger *slog.Logger

	mu      sync.Mutex // guards the machine, pos, stale, readers, and writes of cpSeq
	reads   *sync.Cond // on mu: durability moved, or readers finished
	pos     Position   // what the machine has folded, including lines not yet durable
	cpSeq   atomic.Uint64
	stale   bool         // the machine holds records whose commit failed: rebuild before use
	readers int          // readers waiting for the disk to catch up with the machine
	waiting atomic.Int32 // readers, as the syncer sees them without mu: it does not wait for a cohort then

	qmu        sync.Mutex // guards queue, committing, room
	queue      []Request  // at most QueueMax
	committing bool
	room       chan struct{} // closed when a batch leaves the queue, if writers wait for room
	wake       chan struct{} // a request queued or a sync ended: the committer looks again
	synced     chan struct{} // the syncer stopped: everything written is durable (or failed)

	// Owned by the committer (whoever holds committing).
	tx     *Tx // held across pipelined batches; nil when no write is under way
	txHeld time.Time

	dmu           sync.Mutex // guards the fields below
	durable       Position
	unsynced      []*written    // batches written and not yet fsynced, in log order
	unwritten     []*written    // batches decided while an fsync ran, in the tx's buffer: the syncer writes them next
	unwrittenReqs int           // the requests in unwritten
	decided       chan struct{} // unwritten reached cohortTarget
	cohortTarget  int           // the requests the syncer waits for (0: it does not)
	syncing       bool          // a syncer goroutine runs
	syncErr       error         // an fsync failed: what follows it fails until the committer cuts the log back
	failFrom      Position
	failedWs      []*written // batches the failed fsync covered, or written after it: told once the log is cut
	stats         Stats
	notify        chan struct{} // closed and replaced at each change of the durable position

	cpWriters sync.WaitGroup // background checkpoint encodes and writes, joined by Close
	loops     sync.WaitGroup // the commit loop, the syncer and acknowledgers, joined by Close
	cpWrite   sync.Mutex     // one checkpoint at a time, in order
	cpBusy    bool           // a checkpoint is being made; guarded by dmu

	// Holding (pipeline_hold.go): the committer keeps the lock when idle,
	// and batches decided meanwhile wait in the tx's buffer, settled.
	holding  atomic.Bool
	held     []*written // decided while holding, not yet written; guarded by mu
	holdErr  error      // the first failure to write held lines, for Unhold; guarded by mu
	heldInfo CommitInfo // what the held lines written so far hold, for Observe; guarded by mu
}

// written is one decided batch on its way to the disk: in the tx's buffer
// (unwritten), then in the file awaiting fsync (unsynced).
type written struct {
	batch    []Request
	from     Position // the log before the batch
	to       Position // the log after it
	records  int
	appended int // what Decide counted as results
}

// NewPipeline makes the group commit of log for machine m, and folds the
// log into m (from its checkpoint when one matches). The caller closes the
// log after Close.
func NewPipeline(cfg CommitConfig, log SessionLog, m Machine, logger *slog.Logger) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("commit config: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	p := &Pipeline{
		cfg: cfg, log: log, m: m, logger: logger,
		wake: make(chan struct{}, 1), synced: make(chan struct{}, 1), decided: make(chan struct{}, 1),
	}
	p.reads = sync.NewCond(&p.mu)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.load(); err != nil {
		return nil, err
	}
	return p, nil
}

// Close waits for every write, sync and checkpoint under way, then leaves a
// checkpoint the next open can start from, by the open rule. Submit must
// not be called during or after it.
func (p *Pipeline) Close() {
	p.Wait()
	p.mu.Lock()
	if !p.stale {
		p.maybeCheckpointLocked()
	}
	p.mu.Unlock()
}

// Wait returns once every goroutine the pipeline has started so far has
// ended: commit loops, syncers, acknowledgers and checkpoint writers.
func (p *Pipeline) Wait() {
	p.loops.Wait()
	p.cpWriters.Wait()
}

// Changed returns a channel closed the next time the durable position moves
// (a commit here, or a Refresh that folded lines from elsewhere).
func (p *Pipeline) Changed() <-chan struct{} {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	if p.notify == nil {
		p.notify = make(chan struct{})
	}
	return p.notify
}

// Durable is the end of what this pipeline knows to be durable: its own
// acknowledged lines and those folded from other processes.
func (p *Pipeline) Durable() Position {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return p.durable
}

// setDurable records pos as durable and wakes waiters. Called with dmu held.
func (p *Pipeline) setDurable(pos Position) {
	if pos.Seq == p.durable.Seq && pos.Offset == p.durable.Offset {
		return
	}
	p.durable = pos
	if p.notify != nil {
		close(p.notify)
		p.notify = nil
	}
}

// Stats returns the counters.
func (p *Pipeline) Stats() Stats {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return p.stats
}

// ReadersWaiting counts the readers waiting for the lines the state folded
// to become durable: proof, for a test, that a read waits for an fsync.
func (p *Pipeline) ReadersWaiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.readers
}

// Queued counts the requests waiting in the queue for a batch: proof, for a
// test, that its writers have queued, and in which order.
func (p *Pipeline) Queued() int {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	return len(p.queue)
}

// CountRefused adds n commands refused before they reached the pipeline
// (checks that need no state), so Stats counts every refusal.
func (p *Pipeline) CountRefused(n int) {
	p.dmu.Lock()
	p.stats.Refused += uint64(n)
	p.dmu.Unlock()
}
