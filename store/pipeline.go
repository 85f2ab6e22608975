package store

import (
	"context"
	"errors"
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

// ErrQueueFull is wrapped by Submit's error when the commit queue stayed
// full until the writer's context ended.
var ErrQueueFull = errors.New("commit queue full")

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

// CountRefused adds n commands refused before they reached the pipeline
// (checks that need no state), so Stats counts every refusal.
func (p *Pipeline) CountRefused(n int) {
	p.dmu.Lock()
	p.stats.Refused += uint64(n)
	p.dmu.Unlock()
}

// load rebuilds the state from the checkpoint (if it matches) and the tail.
// Called with mu held.
func (p *Pipeline) load() error {
	p.m.Reset()
	p.pos, p.stale = Position{}, false
	p.cpSeq.Store(0)
	if pos, payload, verify, err := p.log.ReadCheckpointAsync(); err == nil {
		// Decode while the checksum is computed; trust neither until both hold.
		derr := p.m.Restore(payload)
		switch verr := verify(); {
		case verr != nil:
			p.m.Reset()
			p.logger.Warn("ignoring a damaged checkpoint; folding the log", "err", verr)
		case derr != nil:
			p.m.Reset()
			p.logger.Warn("ignoring a checkpoint that does not decode; folding the log", "err", derr)
		default:
			p.pos = pos
			p.cpSeq.Store(pos.Seq)
		}
	} else if !errors.Is(err, ErrNoCheckpoint) {
		return err
	}
	if err := p.refreshLocked(); err != nil {
		return err
	}
	p.dmu.Lock()
	p.setDurable(p.pos)
	p.dmu.Unlock()
	p.maybeCheckpointLocked()
	return nil
}

// Refresh folds lines other processes appended since the last look. It
// takes no file lock: readers never block writers.
func (p *Pipeline) Refresh() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale {
		return p.load()
	}
	return p.refreshLocked()
}

func (p *Pipeline) refreshLocked() error {
	before := p.pos.Seq
	pos, _, err := p.log.Scan(p.pos, p.m.Apply)
	p.pos = pos
	if pos.Seq != before {
		// Lines from another process. Our own lines before them are all
		// durable: the committer holds the file lock until they are.
		p.dmu.Lock()
		p.setDurable(pos)
		p.dmu.Unlock()
	}
	return err
}

// Checkpoint thresholds as a share of the lines the last checkpoint covered
// (see CommitConfig.CheckpointMin).
const (
	openShare = 8 // at open and close
	runShare  = 2 // while a process writes
)

// checkpointWantedAt reports whether the log at seq has grown enough since
// the last checkpoint: at least CheckpointMin lines and 1/share of the lines
// that checkpoint covered.
func (p *Pipeline) checkpointWantedAt(seq, share uint64) bool {
	cp := p.cpSeq.Load()
	since := seq - cp
	return since >= p.cfg.CheckpointMin && since >= cp/share
}

// writeSnapshotLocked writes a checkpoint of the state as it is, under the
// lock.
func (p *Pipeline) writeSnapshotLocked() error {
	snap := p.m.Snapshot(false)
	defer snap.Release()
	_, err := p.log.WriteCheckpointFrom(p.pos, snap.Encode)
	return err
}

// maybeCheckpointLocked writes a checkpoint, under the lock, if the log has
// grown by the open rule since the last: at open and close, when nothing
// else writes.
func (p *Pipeline) maybeCheckpointLocked() {
	if !p.checkpointWantedAt(p.pos.Seq, openShare) {
		return
	}
	p.cpSeq.Store(p.pos.Seq)
	if err := p.writeSnapshotLocked(); err != nil {
		p.logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
	}
}

// Checkpoint writes a checkpoint at the current position now.
func (p *Pipeline) Checkpoint() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	if err := p.writeSnapshotLocked(); err != nil {
		return err
	}
	p.cpSeq.Store(p.pos.Seq)
	return nil
}

// Read calls fn, with the lock held, once the state holds everything
// durable and nothing that is not, with the position it has folded. fn may
// read the machine's state; it must not keep references past its return,
// modify the state, or call the pipeline.
func (p *Pipeline) Read(fn func(pos Position)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	fn(p.pos)
}

// Position is the end of what has been folded and is durable.
func (p *Pipeline) Position() Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	return p.pos
}

// waitDurableLocked waits, with mu held, until every line the state has
// folded is durable, so a reader never sees a record before its writer is
// acknowledged. The committer does not decide while readers wait, so the
// wait is at most one fsync. After a failed fsync it waits for the
// committer to cut the log back; the state is then stale and rebuilt by the
// next Refresh or write.
//
// The syncer moves durability under dmu, not mu, so a reader counts itself
// in waiting before it looks: a syncer that moves durability after the look
// then sees the count and broadcasts under mu (wakeReaders), which it cannot
// take until this reader is inside Wait. Without that, an fsync ending
// between the look and the Wait was never heard, and the reader waited, and
// the committer for the reader, for ever.
func (p *Pipeline) waitDurableLocked() {
	for {
		p.waiting.Add(1)
		p.dmu.Lock()
		done := p.durable.Seq >= p.pos.Seq && p.syncErr == nil
		p.dmu.Unlock()
		if done {
			p.waiting.Add(-1)
			break
		}
		p.readers++
		signal(p.decided) // a syncer waiting for a cohort: write what there is
		p.reads.Wait()
		p.waiting.Add(-1)
		p.readers--
	}
	if p.readers == 0 {
		p.reads.Broadcast() // a committer may be waiting for readers to finish
	}
}

// Submit queues r and either returns at once, the committer carrying it
// from there, or becomes the committer: the first writer to find no commit
// in progress commits its own batch inline (a lone writer pays no goroutine
// hand-off), then leaves whatever queued meanwhile to a commit loop of its
// own, so concurrent writers share one lock and few fsyncs. Either way r is
// settled exactly once, after Submit returns or before; the caller waits
// for that. A full queue (QueueMax) makes Submit wait for room until ctx
// ends; it then returns an error wrapping ErrQueueFull and ctx's, and r is
// never settled nor decided.
func (p *Pipeline) Submit(ctx context.Context, r Request) error {
	p.qmu.Lock()
	for len(p.queue) >= p.cfg.QueueMax {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.qmu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%w (%d waiting): %w", ErrQueueFull, p.cfg.QueueMax, ctx.Err())
		}
		p.qmu.Lock()
	}
	p.queue = append(p.queue, r)
	if p.committing {
		p.qmu.Unlock()
		signal(p.wake) // the committer may be waiting for work
		return nil
	}
	p.committing = true
	p.loops.Add(1)
	p.qmu.Unlock()
	p.commitLoopN(1)
	return nil
}

// holdMax bounds how long the committer keeps the file lock through a
// stream of batches while a writer in another process waits for it: then it
// lets the pipeline drain, releases it and gives way.
const holdMax = 20 * time.Millisecond

// giveWay waits, after the committer released the file lock for a waiting
// writer, until that writer has it (it stops saying it waits), at most
// 20 ms: an flock goes to whoever asks first, and the committer would
// otherwise take it straight back.
func (p *Pipeline) giveWay() {
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline) && p.log.Contended(); {
		time.Sleep(100 * time.Microsecond)
	}
}

// commitLoop commits queued requests until the queue is empty.
func (p *Pipeline) commitLoop() { p.commitLoopN(0) }

// commitLoopN commits queued requests in batches until the queue is empty
// and everything written is durable or, with inline > 0, after that many
// batches, handing what is still queued to a commit loop in its own
// goroutine. p.committing is true on entry and owned by the loop; p.loops
// counts it.
func (p *Pipeline) commitLoopN(inline int) {
	defer p.loops.Done()
	var inflight []Request
	defer func() {
		// A panic in a commit is a broken invariant. It must neither wedge
		// later writers nor take the process down: fail the batch, rebuild
		// the state from the log before the next write, and say so loudly.
		if v := recover(); v != nil {
			p.logger.Error("store: internal error in a commit; the batch failed and the state will be rebuilt from the log", "panic", fmt.Sprint(v))
			for _, r := range inflight {
				if !r.Settled() {
					r.Settle(fmt.Errorf("store: internal error: %v", v), false)
				}
			}
			p.drainAndRelease() // earlier batches are written: make them durable (or fail them)
			p.mu.Lock()
			p.stale = true
			p.rebuildLocked()
			p.mu.Unlock()
			p.qmu.Lock()
			p.committing = false
			restart := len(p.queue) > 0
			if restart {
				p.committing = true
				p.loops.Add(1)
			}
			p.qmu.Unlock()
			if restart {
				go p.commitLoop()
			}
		}
	}()
	for done := 0; ; done++ {
		if p.failed() {
			p.recoverFromSyncFailure()
		}
		p.qmu.Lock()
		n := min(len(p.queue), p.cfg.BatchMax)
		if n == 0 {
			p.qmu.Unlock()
			if p.idle() {
				// Everything written is durable: let other processes in.
				p.drainAndRelease()
				p.qmu.Lock()
				if len(p.queue) == 0 {
					p.committing = false
					p.qmu.Unlock()
					return
				}
				p.qmu.Unlock()
				continue
			}
			select { // a request queued, or the syncer stopped
			case <-p.wake:
			case <-p.synced:
			}
			continue
		}
		if inline > 0 && done == inline {
			p.loops.Add(1) // still committing: the loop carries on elsewhere
			p.qmu.Unlock()
			go p.commitLoop()
			return
		}
		batch := make([]Request, n)
		copy(batch, p.queue)
		p.queue = p.queue[n:]
		if p.room != nil {
			close(p.room) // writers waiting for room: there is
			p.room = nil
		}
		p.qmu.Unlock()
		if p.tx != nil && time.Since(p.txHeld) > holdMax {
			if p.log.Contended() {
				p.drainAndRelease()
				p.giveWay()
			} else {
				p.txHeld = time.Now()
			}
		}
		inflight = batch
		p.commit(context.Background(), batch, inline > 0)
		inflight = nil
	}
}

// fail settles every request of batch with err (a request Decide refused
// keeps its refusal).
func fail(batch []Request, err error) {
	for _, r := range batch {
		r.Settle(err, true)
	}
}

// commit carries one batch through lock, catch-up, decide and write, then
// hands it to be made durable: inline, by a writer committing its own batch
// when nothing else waits (a lone writer pays no hand-off), else by the
// syncer goroutine, while the committer decides the next batch.
func (p *Pipeline) commit(ctx context.Context, batch []Request, own bool) {
	if p.tx == nil {
		lockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LockTimeout)
		tx, err := p.log.Begin(lockCtx)
		cancel()
		if err != nil {
			fail(batch, err)
			return
		}
		p.tx, p.txHeld = tx, time.Now()
		p.mu.Lock()
		err = p.catchUpLocked()
		p.mu.Unlock()
		if err != nil {
			p.releaseTx()
			fail(batch, err)
			return
		}
	}
	start, err := p.decideAndWrite(batch)
	if err != nil {
		// Nothing of this batch is in the file; the state folded it.
		p.drainAndRelease()
		p.mu.Lock()
		p.rebuildLocked()
		p.mu.Unlock()
		fail(batch, err)
		return
	}
	if !start {
		return // the running syncer writes it and takes it with its next fsync
	}
	p.qmu.Lock()
	more := len(p.queue) > 0
	p.qmu.Unlock()
	if more || !own {
		p.loops.Add(1)
		go func() {
			defer p.loops.Done()
			p.syncLoop(false)
		}()
		return
	}
	p.syncLoop(true)
}

// decideAndWrite has the machine decide the batch against the state, and
// hands it on: written at once when no fsync runs (start reports that the
// caller must start the syncer), else left in the tx's buffer for the
// syncer to write when its fsync ends. A write while an fsync runs makes
// that fsync several times slower on common file systems, so lines are
// written only between fsyncs. On a write error the state is marked stale.
// A panic leaves mu unlocked.
func (p *Pipeline) decideAndWrite(batch []Request) (start bool, err error) {
	tx := p.tx
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.readers > 0 {
		p.reads.Wait() // readers wait for the disk; let them read first
	}
	from := p.pos
	defer func() {
		if v := recover(); v != nil {
			tx.Rewind(from) // nothing of a failed batch may reach the file
			panic(v)
		}
	}()
	appended, refused := p.m.Decide(tx, batch)
	to := tx.Pending()
	w := &written{batch: batch, from: from, to: to, records: int(to.Seq - from.Seq), appended: appended}
	p.dmu.Lock()
	p.stats.Refused += uint64(refused)
	if p.syncing {
		p.unwritten = append(p.unwritten, w)
		p.unwrittenReqs += len(batch)
		full := p.cohortTarget > 0 && p.unwrittenReqs >= p.cohortTarget
		p.dmu.Unlock()
		if full {
			signal(p.decided) // the syncer's cohort is complete
		}
		p.pos = to
		return false, nil
	}
	p.dmu.Unlock()
	if _, err := tx.Write(); err != nil {
		p.stale = true
		return false, err
	}
	p.pos = to
	p.dmu.Lock()
	p.unsynced = append(p.unsynced, w)
	p.syncing = true
	p.dmu.Unlock()
	return true, nil
}

// writeUnwritten writes the batches decided while the last fsync ran, all
// at once, for the next fsync. Called by the syncer.
func (p *Pipeline) writeUnwritten() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.tx.Write()
	p.dmu.Lock()
	defer p.dmu.Unlock()
	ws := p.unwritten
	p.unwritten, p.unwrittenReqs = nil, 0
	if err != nil {
		p.stale = true
		if p.syncErr == nil {
			p.syncErr, p.failFrom = err, ws[0].from
		}
		p.failedWs = append(p.failedWs, ws...)
		return
	}
	p.unsynced = append(p.unsynced, ws...)
}

// catchUpLocked folds what other processes appended before this tx took the
// lock (rebuilding first if a failed commit left the state stale). Called
// with mu held, by the committer, right after Begin.
func (p *Pipeline) catchUpLocked() error {
	if p.stale {
		if err := p.load(); err != nil {
			return err
		}
	}
	before := p.pos.Seq
	pos, err := p.tx.CatchUp(p.pos, p.m.Apply)
	p.pos = pos
	if err != nil {
		return err
	}
	if pos.Seq != before {
		p.dmu.Lock()
		p.setDurable(pos)
		p.dmu.Unlock()
	}
	return nil
}

// syncLoop makes written batches durable, one fsync for all that are
// waiting, and acknowledges them in order, until none wait. The caller has
// set p.syncing; syncLoop clears it.
func (p *Pipeline) syncLoop(inline bool) {
	acked := 0 // requests the last fsync covered: their writers may be back soon
	var took time.Duration
	for {
		if acked > 1 && p.cfg.CohortWait > 0 && !inline {
			// Let the writers just acknowledged come back and share the
			// next fsync with those waiting, rather than split the writers
			// into cohorts that take turns. (Inline, the syncer is a writer
			// that cannot come back before it returns.)
			p.dmu.Lock()
			waiting := p.unwrittenReqs
			p.dmu.Unlock()
			p.awaitCohort(waiting+acked, min(p.cfg.CohortWait, 2*took))
		}
		acked = 0
		p.dmu.Lock()
		if len(p.unsynced) == 0 && len(p.unwritten) > 0 {
			if p.syncErr == nil {
				p.dmu.Unlock()
				p.writeUnwritten()
				continue
			}
			// After a failed fsync nothing more is written: they fail too.
			p.failedWs = append(p.failedWs, p.unwritten...)
			p.unwritten, p.unwrittenReqs = nil, 0
		}
		ws := p.unsynced
		p.unsynced = nil
		if len(ws) == 0 {
			p.syncing = false
			p.dmu.Unlock()
			p.wakeReaders()
			signal(p.synced)
			signal(p.wake)
			return
		}
		err := p.syncErr
		need := ws[len(ws)-1].to.Offset > p.durable.Offset
		p.dmu.Unlock()
		started := time.Now()
		if err == nil && need {
			err = p.log.Sync()
		}
		elapsed := time.Since(started)
		requests, records, appended := 0, 0, 0
		for _, w := range ws {
			requests += len(w.batch)
			records += w.records
			appended += w.appended
		}
		p.dmu.Lock()
		if err != nil {
			// Their writers hear of it once the committer has cut the
			// lines back out of the file, so a failed write leaves nothing.
			if p.syncErr == nil {
				p.syncErr, p.failFrom = err, ws[0].from
			}
			p.failedWs = append(p.failedWs, ws...)
			p.dmu.Unlock()
			continue
		}
		p.setDurable(ws[len(ws)-1].to)
		if need {
			p.stats.Commits++
		}
		p.stats.Appended += uint64(appended)
		durable := p.durable.Seq
		more := len(p.unwritten) > 0 || len(p.unsynced) > 0
		p.dmu.Unlock()
		acked, took = requests, elapsed
		if more {
			// The next batches are waiting for their fsync: start it first
			// and wake these writers meanwhile, on the other core.
			p.loops.Add(1)
			go func() {
				defer p.loops.Done()
				acknowledge(ws)
			}()
		} else {
			acknowledge(ws)
		}
		if records > 0 && p.cfg.Observe != nil {
			p.cfg.Observe(CommitInfo{Requests: requests, Records: records, Fsync: elapsed})
		}
		p.wakeReaders()
		if p.checkpointWantedAt(durable, runShare) {
			p.startCheckpoint()
		}
	}
}

// wakeReaders wakes the readers waiting for durability, which the syncer
// has just moved under dmu. Readers count themselves in waiting before they
// look at it (see waitDurableLocked), so with none counted nobody can be
// between the look and the Wait, and the syncer skips mu; otherwise it
// broadcasts under mu, which a reader holds from its look until Wait.
func (p *Pipeline) wakeReaders() {
	if p.waiting.Load() == 0 {
		return
	}
	p.mu.Lock()
	p.reads.Broadcast()
	p.mu.Unlock()
}

// awaitCohort waits, at most bound, until target requests are decided and
// waiting to be written.
func (p *Pipeline) awaitCohort(target int, bound time.Duration) {
	if bound <= 0 || p.waiting.Load() > 0 {
		return // readers wait for the disk, and the committer for them
	}
	p.dmu.Lock()
	if p.unwrittenReqs >= target {
		p.dmu.Unlock()
		return
	}
	p.cohortTarget = target
	p.dmu.Unlock()
	timer := time.NewTimer(bound)
	select {
	case <-p.decided:
	case <-timer.C:
	}
	timer.Stop()
	p.dmu.Lock()
	p.cohortTarget = 0
	p.dmu.Unlock()
	select { // a signal that came after the timer: drop it
	case <-p.decided:
	default:
	}
}

// acknowledge tells the writers of durable batches that they are.
func acknowledge(ws []*written) {
	for _, w := range ws {
		for _, r := range w.batch {
			r.Settle(nil, true)
		}
	}
}

// signal leaves a token in c (capacity 1) unless one waits there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// startCheckpoint encodes and writes a checkpoint in the background. The
// encoding waits, like a reader, until the state holds nothing that is not
// durable; at most one runs at a time.
func (p *Pipeline) startCheckpoint() {
	p.dmu.Lock()
	if p.cpBusy {
		p.dmu.Unlock()
		return
	}
	p.cpBusy = true
	p.dmu.Unlock()
	p.cpWriters.Add(1)
	go func() {
		defer p.cpWriters.Done()
		defer func() {
			p.dmu.Lock()
			p.cpBusy = false
			p.dmu.Unlock()
		}()
		p.cpWrite.Lock()
		defer p.cpWrite.Unlock()
		// The state is frozen under the lock, then encoded and written
		// without it, so writers go on meanwhile: encoding takes about a
		// microsecond a promise, a second at a million.
		p.mu.Lock()
		p.waitDurableLocked()
		if p.stale || !p.checkpointWantedAt(p.pos.Seq, runShare) {
			p.mu.Unlock()
			return
		}
		p.cpSeq.Store(p.pos.Seq) // claimed: nobody encodes it twice
		pos, snap := p.pos, p.m.Snapshot(true)
		p.mu.Unlock()
		_, err := p.log.WriteCheckpointFrom(pos, snap.Encode)
		p.mu.Lock()
		snap.Release()
		p.mu.Unlock()
		if err != nil {
			p.logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
		}
	}()
}

// failed reports whether an fsync failed and the log awaits being cut back.
func (p *Pipeline) failed() bool {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return p.syncErr != nil
}

// idle reports whether nothing written awaits an fsync.
func (p *Pipeline) idle() bool {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return !p.syncing && len(p.unsynced) == 0 && len(p.unwritten) == 0
}

// drain waits until everything written is durable (or failed).
func (p *Pipeline) drain() {
	for !p.idle() {
		<-p.synced
	}
}

// drainAndRelease waits until everything written is durable and releases
// the file lock; if an fsync failed meanwhile, it first cuts the log back.
func (p *Pipeline) drainAndRelease() {
	p.drain()
	if p.failed() {
		p.recoverFromSyncFailure()
		return
	}
	p.releaseTx()
}

// recoverFromSyncFailure cuts the log back to before the first batch whose
// fsync failed (every batch after it failed too), so nothing
// unacknowledged stays in the file, and leaves the state to be rebuilt.
func (p *Pipeline) recoverFromSyncFailure() {
	p.drain()
	p.dmu.Lock()
	from := p.failFrom
	p.dmu.Unlock()
	if p.tx != nil {
		if err := p.tx.Cut(from); err != nil {
			p.logger.Error("store: could not cut unacknowledged lines after a failed fsync", "err", err)
		}
	}
	p.releaseTx()
	p.mu.Lock()
	p.stale = true
	p.rebuildLocked()
	p.dmu.Lock()
	err, ws := p.syncErr, p.failedWs
	p.syncErr, p.failedWs = nil, nil
	p.dmu.Unlock()
	p.mu.Unlock()
	p.reads.Broadcast()
	for _, w := range ws {
		fail(w.batch, err)
	}
}

// rebuildLocked refolds the state from the log after a failed write, so
// readers do not see records that are not in it. Called with mu held, the
// tx released and nothing awaiting fsync; if it fails, the state stays
// stale and the next write or Refresh tries again.
func (p *Pipeline) rebuildLocked() {
	if err := p.load(); err != nil {
		p.stale = true
		p.logger.Error("store: could not refold the log after a failed write", "err", err)
	}
}

// releaseTx releases the file lock if the committer holds it.
func (p *Pipeline) releaseTx() {
	if p.tx != nil {
		p.tx.Release()
		p.tx = nil
	}
}
