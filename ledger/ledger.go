// Package ledger joins the durable log (store) and the pure semantics
// (promise): it opens a session, folds its log (from a checkpoint when one
// matches), decides commands under the log's lock, appends them with group
// commit, and answers queries from the folded state.
package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/store"
	"tally/wire"
)

// Config tunes a ledger. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	Limits promise.Limits
	// Now is the clock used to stamp new records. Reads never use it:
	// views take now as an argument.
	Now    func() time.Time
	Logger *slog.Logger
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
	// CohortWait bounds how long, after an fsync, the syncer waits for the
	// writers it just acknowledged to come back and be decided, so they
	// share the next fsync with the batches already waiting instead of
	// forming a cohort of their own (zero: no wait). It never waits longer
	// than twice the last fsync took: a wait worth about the fsync it saves
	// (writers over HTTP come back more slowly than in-process ones).
	CohortWait time.Duration
	// LockTimeout bounds the wait for another process's append.
	LockTimeout time.Duration
	// Timekeeper is the identity of the watcher: the only one that commits
	// lapses and deadline facts.
	Timekeeper string
	// LineageMax bounds an expectation's lineage of extensions (past it only
	// a person extends).
	LineageMax int
	// Observe, if set, is told about every commit (for metrics).
	Observe func(CommitInfo)
	// IdempotencyWindow is how long a request id's response is retained; a
	// retry older than that is refused (RequestHistoryExpired), never run again.
	IdempotencyWindow time.Duration
}

// CommitInfo describes one group commit.
type CommitInfo struct {
	Requests int           // commands in the batch
	Records  int           // lines appended
	Fsync    time.Duration // write + fsync time
}

// DefaultTimekeeper is the watcher's identity unless configured otherwise.
const DefaultTimekeeper = "tally/timekeeper"

func (c Config) expectConfig() expect.Config {
	ec := expect.DefaultConfig()
	ec.Timekeeper = c.Timekeeper
	if c.LineageMax > 0 {
		ec.LineageMax = c.LineageMax
	}
	return ec
}

// WithSettings applies a ledger directory's settings (store.Settings) to c.
func (c Config) WithSettings(s store.Settings) (Config, error) {
	if s.LineageMax < 0 {
		return c, fmt.Errorf("ledger settings: lineage_max: must be at least 1")
	}
	if s.LineageMax > 0 {
		c.LineageMax = s.LineageMax
	}
	if s.RequestHistory != "" {
		d, err := time.ParseDuration(s.RequestHistory)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("ledger settings: request_history: %q must be a positive duration such as 24h", s.RequestHistory)
		}
		c.IdempotencyWindow = d
	}
	return c, nil
}

// DefaultConfig returns the configuration the CLI and server use.
func DefaultConfig() Config {
	return Config{
		Limits: promise.DefaultLimits(), Now: time.Now, Logger: slog.Default(),
		CheckpointMin: 2048, BatchMax: 1024, CohortWait: 2 * time.Millisecond, LockTimeout: 30 * time.Second,
		Timekeeper: DefaultTimekeeper, LineageMax: expect.DefaultConfig().LineageMax,
		IdempotencyWindow: 24 * time.Hour,
	}
}

// Validate reports a configuration that cannot work, quoting the value.
func (c Config) Validate() error {
	switch {
	case c.Now == nil:
		return errors.New("ledger config: Now is nil")
	case c.Logger == nil:
		return errors.New("ledger config: Logger is nil")
	case c.CohortWait < 0:
		return fmt.Errorf("ledger config: CohortWait %v must not be negative", c.CohortWait)
	case c.BatchMax < 1:
		return fmt.Errorf("ledger config: BatchMax %d must be at least 1", c.BatchMax)
	case c.CheckpointMin < 1:
		return fmt.Errorf("ledger config: CheckpointMin %d must be at least 1", c.CheckpointMin)
	case c.LockTimeout <= 0:
		return fmt.Errorf("ledger config: LockTimeout %v must be positive", c.LockTimeout)
	case c.Timekeeper == "":
		return errors.New("ledger config: Timekeeper is empty")
	case c.IdempotencyWindow <= 0:
		return fmt.Errorf("ledger config: IdempotencyWindow %v must be positive", c.IdempotencyWindow)
	}
	if err := c.expectConfig().Validate(); err != nil {
		return fmt.Errorf("ledger config: %w", err)
	}
	return nil
}

// Ledger is one open session. It is safe for concurrent use.
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
type Ledger struct {
	cfg Config
	log *store.Log

	mu      sync.Mutex // guards st, pos, stale, readers, and writes of cpSeq
	reads   *sync.Cond // on mu: durability moved, or readers finished
	st      *State
	pos     store.Position // what st has folded, including lines not yet durable
	cpSeq   atomic.Uint64  // the last checkpoint's sequence; read without mu by the syncer
	stale   bool           // st holds records whose commit failed: rebuild before use
	readers int            // readers waiting for the disk to catch up with st
	waiting atomic.Int32   // readers, as the syncer sees them without mu: it does not wait for a cohort then

	qmu        sync.Mutex // guards queue, committing
	queue      []*request
	committing bool
	wake       chan struct{} // a request queued or a sync ended: the committer looks again
	synced     chan struct{} // the syncer stopped: everything written is durable (or failed)

	syncLog func() error  // the log's fsync; tests put faults in its way
	spread  func() string // mints a promise id outside the lock (spreadID; tests force collisions)

	// Owned by the committer (whoever holds committing).
	tx     *store.Tx // held across pipelined batches; nil when no write is under way
	txHeld time.Time

	dmu           sync.Mutex // guards the fields below
	durable       store.Position
	unsynced      []*written    // batches written and not yet fsynced, in log order
	unwritten     []*written    // batches decided while an fsync ran, in the tx's buffer: the syncer writes them next
	unwrittenReqs int           // the requests in unwritten
	decided       chan struct{} // unwritten reached cohortTarget
	cohortTarget  int           // the requests the syncer waits for (0: it does not)
	syncing       bool          // a syncer goroutine runs
	syncErr       error         // an fsync failed: what follows it fails until the committer cuts the log back
	failFrom      store.Position
	failedWs      []*written // batches the failed fsync covered, or written after it: told once the log is cut
	stats         Stats
	notify        chan struct{} // closed and replaced at each change of the durable position

	ids *mrand.ChaCha8 // id minting; used only under mu

	cpWriters sync.WaitGroup // background checkpoint encodes and writes, joined by Close
	loops     sync.WaitGroup // the commit loop, the syncer and acknowledgers, joined by Close
	cpWrite   sync.Mutex     // one checkpoint at a time, in order
	cpBusy    bool           // a checkpoint is being made; guarded by dmu
}

// written is one decided batch on its way to the disk: in the tx's buffer
// (unwritten), then in the file awaiting fsync (unsynced).
type written struct {
	batch   []*request
	from    store.Position // the log before the batch
	to      store.Position // the log after it
	records int
}

// Changed returns a channel closed the next time the ledger's durable
// position moves (a commit here, or a Refresh that folded lines from
// elsewhere).
func (l *Ledger) Changed() <-chan struct{} {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// Durable is the end of what this ledger knows to be durable: its own
// acknowledged lines and those folded from other processes.
func (l *Ledger) Durable() store.Position {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.durable
}

// setDurable records p as durable and wakes waiters. Called with dmu held.
func (l *Ledger) setDurable(p store.Position) {
	if p.Seq == l.durable.Seq && p.Offset == l.durable.Offset {
		return
	}
	l.durable = p
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// Stats counts what the ledger has done since it was opened.
type Stats struct {
	Commits  uint64 // fsynced transactions
	Appended uint64 // records appended
	Refused  uint64 // commands refused by a rule
}

// Stats returns the counters.
func (l *Ledger) Stats() Stats {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.stats
}

// Open opens the session log in dir and folds it.
func Open(dir string, cfg Config) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lg, err := store.Open(dir, cfg.Logger)
	if err != nil {
		return nil, err
	}
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		lg.Close()
		return nil, fmt.Errorf("seed id generator: %w", err)
	}
	l := &Ledger{cfg: cfg, log: lg, ids: mrand.NewChaCha8(seed), wake: make(chan struct{}, 1), synced: make(chan struct{}, 1), decided: make(chan struct{}, 1)}
	l.reads = sync.NewCond(&l.mu)
	l.syncLog = lg.Sync
	l.spread = spreadID
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.load(); err != nil {
		lg.Close()
		return nil, err
	}
	return l, nil
}

// Close releases the session's files.
func (l *Ledger) Close() error {
	l.loops.Wait()
	l.cpWriters.Wait()
	// Leave a checkpoint the next open can start from, by the open rule.
	l.mu.Lock()
	if !l.stale {
		l.maybeCheckpointLocked()
	}
	l.mu.Unlock()
	return l.log.Close()
}

// Log is the underlying store.
func (l *Ledger) Log() *store.Log { return l.log }

// load rebuilds the state from the checkpoint (if it matches) and the tail.
// Called with l.mu held.
func (l *Ledger) load() error {
	l.st, l.pos, l.stale = newState(l.cfg), store.Position{}, false
	l.cpSeq.Store(0)
	if pos, payload, verify, err := l.log.ReadCheckpointAsync(); err == nil {
		// Decode while the checksum is computed; trust neither until both hold.
		st, derr := readSnapshot(l.cfg, payload, l.log)
		switch verr := verify(); {
		case verr != nil:
			l.cfg.Logger.Warn("ignoring a damaged checkpoint; folding the log", "err", verr)
		case derr != nil:
			l.cfg.Logger.Warn("ignoring a checkpoint that does not decode; folding the log", "err", derr)
		default:
			l.st, l.pos = st, pos
			l.cpSeq.Store(pos.Seq)
		}
	} else if !errors.Is(err, store.ErrNoCheckpoint) {
		return err
	}
	if err := l.refreshLocked(); err != nil {
		return err
	}
	l.dmu.Lock()
	l.setDurable(l.pos)
	l.dmu.Unlock()
	l.maybeCheckpointLocked()
	return nil
}

// Refresh folds lines other processes appended since the last look. It
// takes no file lock: readers never block writers.
func (l *Ledger) Refresh() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stale {
		return l.load()
	}
	return l.refreshLocked()
}

func (l *Ledger) refreshLocked() error {
	before := l.pos.Seq
	pos, _, err := l.log.Scan(l.pos, l.st.apply)
	l.pos = pos
	if pos.Seq != before {
		// Lines from another process. Our own lines before them are all
		// durable: the committer holds the file lock until they are.
		l.dmu.Lock()
		l.setDurable(pos)
		l.dmu.Unlock()
	}
	return err
}

// Checkpoint thresholds as a share of the lines the last checkpoint covered
// (see Config.CheckpointMin).
const (
	openShare = 8 // at open and close
	runShare  = 2 // while a process writes
)

// checkpointWantedAt reports whether the log at seq has grown enough since
// the last checkpoint: at least CheckpointMin lines and 1/share of the lines
// that checkpoint covered.
func (l *Ledger) checkpointWantedAt(seq, share uint64) bool {
	cp := l.cpSeq.Load()
	since := seq - cp
	return since >= l.cfg.CheckpointMin && since >= cp/share
}

// snapshotChunk is how much of a checkpoint is encoded before it is
// written: the state is never encoded whole in memory (a hundred megabytes
// at a million promises, page-faulted in and collected each time).
const snapshotChunk = 256 << 10

// writeSnapshot writes a checkpoint at pos of a state: head, then the
// promise state streamed by promises (State.StreamSnapshot or
// Frozen.StreamSnapshot).
func (l *Ledger) writeSnapshot(pos store.Position, head snapshotHead, promises func([]byte, int, func([]byte) error) error) error {
	_, err := l.log.WriteCheckpointFrom(pos, func(emit func([]byte) error) error {
		return promises(head.append(make([]byte, 0, snapshotChunk+snapshotChunk/4)), snapshotChunk, emit)
	})
	return err
}

// maybeCheckpointLocked writes a checkpoint, under the lock, if the log has
// grown by the open rule since the last: at open and close, when nothing
// else writes.
func (l *Ledger) maybeCheckpointLocked() {
	if !l.checkpointWantedAt(l.pos.Seq, openShare) {
		return
	}
	l.cpSeq.Store(l.pos.Seq)
	if err := l.writeSnapshot(l.pos, l.st.snapshotHead(), l.st.Promises.StreamSnapshot); err != nil {
		l.cfg.Logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
	}
}

// Checkpoint writes a checkpoint at the current position now.
func (l *Ledger) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitDurableLocked()
	if err := l.writeSnapshot(l.pos, l.st.snapshotHead(), l.st.Promises.StreamSnapshot); err != nil {
		return err
	}
	l.cpSeq.Store(l.pos.Seq)
	return nil
}

// Read calls fn with the current state and position: everything durable,
// nothing that is not. fn must not keep references past its return or
// modify the state.
func (l *Ledger) Read(fn func(st *State, pos store.Position)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitDurableLocked()
	fn(l.st, l.pos)
}

// Position is the end of what has been folded and is durable.
func (l *Ledger) Position() store.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waitDurableLocked()
	return l.pos
}

// waitDurableLocked waits, with mu held, until every line the state has
// folded is durable, so a reader never sees a record before its writer is
// acknowledged. The committer does not decide while readers wait, so the
// wait is at most one fsync. After a failed fsync it waits for the
// committer to cut the log back; the state is then stale and rebuilt by the
// next Refresh or write.
func (l *Ledger) waitDurableLocked() {
	for {
		l.dmu.Lock()
		done := l.durable.Seq >= l.pos.Seq && l.syncErr == nil
		l.dmu.Unlock()
		if done {
			break
		}
		l.readers++
		l.waiting.Add(1)
		signal(l.decided) // a syncer waiting for a cohort: write what there is
		l.reads.Wait()
		l.waiting.Add(-1)
		l.readers--
	}
	if l.readers == 0 {
		l.reads.Broadcast() // a committer may be waiting for readers to finish
	}
}

// WriteOptions carry what a write knows beyond its command.
type WriteOptions struct {
	Actor     string
	RequestID string
	// Render, if set, makes the write's response from the state right after
	// its records are folded, under the session lock (Execute returns it).
	// A writer that rendered after Execute would have to wait, like any
	// reader, until every batch decided since its own is durable too. It
	// must be quick and must not keep references to st. An Idempotency's
	// Render takes its place.
	Render func(st *State, res []Result) []byte
}

// Result is one record an accepted command appended.
type Result struct {
	Seq      uint64
	Type     string
	Event    promise.Event // set for promise records
	Line     []byte        // the line as written, without its newline
	Warnings []string
}

// request is one queued command. decide runs under the log's lock against
// the current state; it returns the records to append.
type request struct {
	opts   WriteOptions
	decide func(st *State, now time.Time) ([]pending, []string, error)
	// prepared, when decide is nil: a promise command checked and encoded
	// outside the lock, with only promise.Admit left to run under it. It
	// lives in the request so the hot path allocates once.
	prepared preparedPromise
	result   [1]Result // res of a one-record request
	idem     *Idempotency
	res      []Result
	response []byte // the recorded response of an idempotent request
	replayed bool   // the response is a retry's: nothing was appended
	err      error
	done     chan struct{}
}

// preparedPromise is a promise command ready for Admit, and its record.
type preparedPromise struct {
	p    promise.Prepared
	pend [1]pending
	mint bool // its id was minted here: a taken one is minted again, not refused
}

// decideIn decides r against the state under the lock.
func (l *Ledger) decideIn(r *request, now time.Time) ([]pending, []string, error) {
	if r.decide != nil {
		return r.decide(l.st, now)
	}
	pp := &r.prepared
	if !pp.mint {
		warn, err := l.st.Promises.Admit(&pp.p)
		if err != nil {
			return nil, nil, err
		}
		return pp.pend[:], warn, nil
	}
	id := pp.p.Event.ID
	warn, err := l.st.Promises.AdmitFresh(&pp.p, l.mintID)
	if err != nil {
		return nil, nil, err
	}
	if pp.p.Event.ID != id { // the minted id was taken: encode the new one
		pp.pend[0] = promisePending(pp.p.Event)
	}
	return pp.pend[:], warn, nil
}

type pending struct {
	typ     string
	ev      promise.Event // set for promise records
	body    []byte
	party   string // the record's own party field; the envelope records the actor when it differs
	import_ bool
}

func promisePending(ev promise.Event) pending {
	return pending{typ: ev.Type, ev: ev, body: ev.Encode(), party: ev.Party()}
}

// Submit decides a promise command as opts.Actor and appends its record,
// returning once it is durable. A declaration without an id gets one minted
// under the lock, where uniqueness is decided.
func (l *Ledger) Submit(ctx context.Context, cmd promise.Command, opts WriteOptions) (Result, error) {
	res, _, _, err := l.Execute(ctx, Command{Promise: cmd}, opts, nil)
	if err != nil {
		return Result{}, err
	}
	return res[0], nil
}

// SubmitClaim decides a claim command as opts.Actor and appends its records
// as one atomic batch, returning once they are durable.
func (l *Ledger) SubmitClaim(ctx context.Context, cmd claim.Command, opts WriteOptions) ([]Result, error) {
	res, _, _, err := l.Execute(ctx, Command{Claim: cmd}, opts, nil)
	return res, err
}

// SubmitExpect decides an expectations command as opts.Actor (human: the
// actor is a person) and appends its records, returning once durable.
func (l *Ledger) SubmitExpect(ctx context.Context, cmd expect.Command, human bool, opts WriteOptions) ([]Result, error) {
	res, _, _, err := l.Execute(ctx, Command{Expect: cmd, Human: human}, opts, nil)
	return res, err
}

// Sweep commits, as the timekeeper, every expectation lapse and withdrawal
// due at the ledger's clock (at most max). The records are decided under the
// log's lock, so two watchers sweeping at once never record a fact twice.
func (l *Ledger) Sweep(ctx context.Context, max int) ([]Result, error) {
	return l.submit(ctx, &request{opts: WriteOptions{Actor: l.cfg.Timekeeper}, decide: func(st *State, now time.Time) ([]pending, []string, error) {
		evs := st.Expects.Sweep(now, max)
		out := make([]pending, len(evs))
		for i, ev := range evs {
			out[i] = pending{typ: ev.Type, body: ev.Encode()}
		}
		return out, nil, nil
	}})
}

// MintID returns a fresh promise id in pinki's shape: pnk_ and 6 hex digits.
// Uniqueness is checked under the log's lock; the ids need to be spread, not
// secret, so a seeded generator serves (one system call per ledger, not per id).
func (l *Ledger) mintID() string {
	var b [3]byte
	v := l.ids.Uint64()
	b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16)
	return "pnk_" + hex.EncodeToString(b[:])
}

// spreadID is a promise id in pinki's shape minted without the session
// lock, from the runtime's generator; the lock's holder checks it is free.
func spreadID() string {
	var b [3]byte
	v := mrand.Uint64()
	b[0], b[1], b[2] = byte(v), byte(v>>8), byte(v>>16)
	return "pnk_" + hex.EncodeToString(b[:])
}

// MintID returns a fresh promise id from the system's randomness.
func MintID() string {
	var b [3]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("ledger: no randomness: " + err.Error())
	}
	return "pnk_" + hex.EncodeToString(b[:])
}

// submit queues req and either waits for the committer or becomes it: the
// first writer to find no commit in progress commits everything queued, in
// batches, so concurrent writers share one lock and few fsyncs.
func (l *Ledger) submit(ctx context.Context, req *request) ([]Result, error) {
	req.done = make(chan struct{})
	l.qmu.Lock()
	l.queue = append(l.queue, req)
	if l.committing {
		l.qmu.Unlock()
		l.nudge()
		<-req.done // commits are bounded by LockTimeout; the result is always delivered
		return req.res, req.err
	}
	// Nobody is committing: commit this batch here (a lone writer pays no
	// goroutine hand-off), then leave whatever queued meanwhile to a commit
	// loop of its own, so this writer is not held back doing others' commits.
	l.committing = true
	l.loops.Add(1)
	l.qmu.Unlock()
	l.commitLoopN(1)
	<-req.done
	return req.res, req.err
}

// nudge wakes the committer if it waits for work.
func (l *Ledger) nudge() { signal(l.wake) }

// holdMax bounds how long the committer keeps the file lock through a
// stream of batches while a writer in another process waits for it: then it
// lets the pipeline drain, releases it and gives way.
const holdMax = 20 * time.Millisecond

// giveWay waits, after the committer released the file lock for a waiting
// writer, until that writer has it (it stops saying it waits), at most
// 20 ms: an flock goes to whoever asks first, and the committer would
// otherwise take it straight back.
func (l *Ledger) giveWay() {
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline) && l.log.Contended(); {
		time.Sleep(100 * time.Microsecond)
	}
}

// commitLoop commits queued requests until the queue is empty.
func (l *Ledger) commitLoop() { l.commitLoopN(0) }

// commitLoopN commits queued requests in batches until the queue is empty
// and everything written is durable or, with inline > 0, after that many
// batches, handing what is still queued to a commit loop in its own
// goroutine. l.committing is true on entry and owned by the loop; l.loops
// counts it.
func (l *Ledger) commitLoopN(inline int) {
	defer l.loops.Done()
	var inflight []*request
	defer func() {
		// A panic in a commit is a broken invariant. It must neither wedge
		// later writers nor take the process down: fail the batch, rebuild
		// the state from the log before the next write, and say so loudly.
		if p := recover(); p != nil {
			l.cfg.Logger.Error("ledger: internal error in a commit; the batch failed and the state will be rebuilt from the log", "panic", fmt.Sprint(p))
			for _, r := range inflight {
				select {
				case <-r.done:
				default:
					r.err, r.res = fmt.Errorf("ledger: internal error: %v", p), nil
					close(r.done)
				}
			}
			l.drainAndRelease() // earlier batches are written: make them durable (or fail them)
			l.mu.Lock()
			l.stale = true
			l.rebuildLocked()
			l.mu.Unlock()
			l.qmu.Lock()
			l.committing = false
			restart := len(l.queue) > 0
			if restart {
				l.committing = true
				l.loops.Add(1)
			}
			l.qmu.Unlock()
			if restart {
				go l.commitLoop()
			}
		}
	}()
	for done := 0; ; done++ {
		if l.failed() {
			l.recoverFromSyncFailure()
		}
		l.qmu.Lock()
		n := min(len(l.queue), l.cfg.BatchMax)
		if n == 0 {
			l.qmu.Unlock()
			if l.idle() {
				// Everything written is durable: let other processes in.
				l.drainAndRelease()
				l.qmu.Lock()
				if len(l.queue) == 0 {
					l.committing = false
					l.qmu.Unlock()
					return
				}
				l.qmu.Unlock()
				continue
			}
			select { // a request queued, or the syncer stopped
			case <-l.wake:
			case <-l.synced:
			}
			continue
		}
		if inline > 0 && done == inline {
			l.loops.Add(1) // still committing: the loop carries on elsewhere
			l.qmu.Unlock()
			go l.commitLoop()
			return
		}
		batch := make([]*request, n)
		copy(batch, l.queue)
		l.queue = l.queue[n:]
		l.qmu.Unlock()
		if l.tx != nil && time.Since(l.txHeld) > holdMax {
			if l.log.Contended() {
				l.drainAndRelease()
				l.giveWay()
			} else {
				l.txHeld = time.Now()
			}
		}
		inflight = batch
		l.commit(context.Background(), batch, inline > 0)
		inflight = nil
	}
}

// commit carries one batch through lock, catch-up, decide and write, then
// hands it to be made durable: inline, by a writer committing its own batch
// when nothing else waits (a lone writer pays no hand-off), else by the
// syncer goroutine, while the committer decides the next batch.
func (l *Ledger) commit(ctx context.Context, batch []*request, own bool) {
	fail := func(err error) {
		for _, r := range batch {
			if r.err == nil {
				r.err, r.res = err, nil
			}
			close(r.done)
		}
	}
	if l.tx == nil {
		lockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.LockTimeout)
		tx, err := l.log.Begin(lockCtx)
		cancel()
		if err != nil {
			fail(err)
			return
		}
		l.tx, l.txHeld = tx, time.Now()
		l.mu.Lock()
		err = l.catchUpLocked()
		l.mu.Unlock()
		if err != nil {
			l.releaseTx()
			fail(err)
			return
		}
	}
	start, err := l.decideAndWrite(batch)
	if err != nil {
		// Nothing of this batch is in the file; the state folded it.
		l.drainAndRelease()
		l.mu.Lock()
		l.rebuildLocked()
		l.mu.Unlock()
		fail(err)
		return
	}
	if !start {
		return // the running syncer writes it and takes it with its next fsync
	}
	l.qmu.Lock()
	more := len(l.queue) > 0
	l.qmu.Unlock()
	if more || !own {
		l.loops.Add(1)
		go func() {
			defer l.loops.Done()
			l.syncLoop(false)
		}()
		return
	}
	l.syncLoop(true)
}

// decideAndWrite decides each request of the batch against the state, folds
// and appends what they decide, and hands the batch on: written at once when
// no fsync runs (start reports that the caller must start the syncer), else
// left in the tx's buffer for the syncer to write when its fsync ends. A
// write while an fsync runs makes that fsync several times slower on common
// file systems, so lines are written only between fsyncs. On a write error
// the state is marked stale. A panic leaves mu unlocked.
func (l *Ledger) decideAndWrite(batch []*request) (start bool, err error) {
	tx := l.tx
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.readers > 0 {
		l.reads.Wait() // readers wait for the disk; let them read first
	}
	from := l.pos
	defer func() {
		if p := recover(); p != nil {
			tx.Rewind(from) // nothing of a failed batch may reach the file
			panic(p)
		}
	}()
	now := l.cfg.Now()
	refused := 0
	for _, r := range batch {
		if l.checkIdempotency(r, now) {
			continue
		}
		recs, warn, err := l.decideIn(r, now)
		if err != nil {
			r.err = err
			refused++
			continue
		}
		if len(recs) == 0 {
			continue // nothing to do (a sweep with nothing due)
		}
		l.appendLocked(tx, r, recs, warn, now)
	}
	to := tx.Pending()
	w := &written{batch: batch, from: from, to: to, records: int(to.Seq - from.Seq)}
	l.dmu.Lock()
	l.stats.Refused += uint64(refused)
	if l.syncing {
		l.unwritten = append(l.unwritten, w)
		l.unwrittenReqs += len(batch)
		full := l.cohortTarget > 0 && l.unwrittenReqs >= l.cohortTarget
		l.dmu.Unlock()
		if full {
			signal(l.decided) // the syncer's cohort is complete
		}
		l.pos = to
		return false, nil
	}
	l.dmu.Unlock()
	if _, err := tx.Write(); err != nil {
		l.stale = true
		return false, err
	}
	l.pos = to
	l.dmu.Lock()
	l.unsynced = append(l.unsynced, w)
	l.syncing = true
	l.dmu.Unlock()
	return true, nil
}

// writeUnwritten writes the batches decided while the last fsync ran, all
// at once, for the next fsync. Called by the syncer.
func (l *Ledger) writeUnwritten() {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.tx.Write()
	l.dmu.Lock()
	defer l.dmu.Unlock()
	ws := l.unwritten
	l.unwritten, l.unwrittenReqs = nil, 0
	if err != nil {
		l.stale = true
		if l.syncErr == nil {
			l.syncErr, l.failFrom = err, ws[0].from
		}
		l.failedWs = append(l.failedWs, ws...)
		return
	}
	l.unsynced = append(l.unsynced, ws...)
}

// appendLocked appends the records one request decided and folds them into
// the state. Called with mu held and the tx caught up.
func (l *Ledger) appendLocked(tx *store.Tx, r *request, recs []pending, warn []string, now time.Time) {
	if len(recs) == 1 {
		r.res = r.result[:0]
	} else {
		r.res = make([]Result, 0, len(recs))
	}
	size := 0
	for _, p := range recs {
		size += len(p.body) + 160 // the envelope and the hash
	}
	tx.Grow(size)
	for _, p := range recs {
		rec := store.Record{Body: p.body, RequestID: r.opts.RequestID, Import: p.import_}
		if r.opts.Actor != p.party && !p.import_ {
			rec.Actor = r.opts.Actor
		}
		seq, err := tx.Append(rec)
		if err != nil {
			// Only a record over the line limit fails here, and it
			// fails before anything of it is buffered.
			r.err = err
			break
		}
		line := lastLine(tx.Lines())
		if p.ev.Type != "" && !p.import_ {
			// A promise record this process just encoded: fold the
			// event itself rather than decoding its line again.
			l.st.Promises.Apply(promise.Meta{Seq: seq, Actor: rec.Actor}, &p.ev)
		} else {
			off := tx.Pending().Offset - int64(len(line)) - 1
			if err := l.st.apply(store.Entry{Line: line, Env: store.Envelope{Seq: seq, Actor: rec.Actor}, Offset: off}); err != nil {
				panic(fmt.Sprintf("ledger: a record it just wrote does not fold: %v", err))
			}
		}
		r.res = append(r.res, Result{Seq: seq, Type: p.typ, Event: p.ev, Line: line, Warnings: warn})
	}
	if r.err == nil && r.idem == nil && r.opts.Render != nil {
		r.response = r.opts.Render(l.st, r.res)
	}
	if r.err == nil && r.idem != nil {
		// The response is recorded inside one log line: compact JSON.
		r.response = bytes.TrimSpace(r.idem.Render(l.st, r.res))
		if !wire.Valid(r.response) || bytes.IndexByte(r.response, '\n') >= 0 {
			panic("ledger: an idempotent response must be one line of JSON")
		}
		rec := store.Record{Body: requestRecord(now, r.idem, len(r.res), r.response), Actor: r.opts.Actor, RequestID: r.opts.RequestID}
		seq, err := tx.Append(rec)
		if err != nil {
			panic(fmt.Sprintf("ledger: request record does not fit a line: %v", err))
		}
		line := lastLine(tx.Lines())
		off := tx.Pending().Offset - int64(len(line)) - 1
		if err := l.st.apply(store.Entry{Line: line, Env: store.Envelope{Seq: seq, Actor: rec.Actor}, Offset: off}); err != nil {
			panic(fmt.Sprintf("ledger: a request record it just wrote does not fold: %v", err))
		}
	}
}

// catchUpLocked folds what other processes appended before this tx took the
// lock (rebuilding first if a failed commit left the state stale). Called
// with mu held, by the committer, right after Begin.
func (l *Ledger) catchUpLocked() error {
	if l.stale {
		if err := l.load(); err != nil {
			return err
		}
	}
	before := l.pos.Seq
	pos, err := l.tx.CatchUp(l.pos, l.st.apply)
	l.pos = pos
	if err != nil {
		return err
	}
	if pos.Seq != before {
		l.dmu.Lock()
		l.setDurable(pos)
		l.dmu.Unlock()
	}
	return nil
}

// syncLoop makes written batches durable, one fsync for all that are
// waiting, and acknowledges them in order, until none wait. The caller has
// set l.syncing; syncLoop clears it.
func (l *Ledger) syncLoop(inline bool) {
	acked := 0 // requests the last fsync covered: their writers may be back soon
	var took time.Duration
	for {
		if acked > 1 && l.cfg.CohortWait > 0 && !inline {
			// Let the writers just acknowledged come back and share the
			// next fsync with those waiting, rather than split the writers
			// into cohorts that take turns. (Inline, the syncer is a writer
			// that cannot come back before it returns.)
			l.dmu.Lock()
			waiting := l.unwrittenReqs
			l.dmu.Unlock()
			l.awaitCohort(waiting+acked, min(l.cfg.CohortWait, 2*took))
		}
		acked = 0
		l.dmu.Lock()
		if len(l.unsynced) == 0 && len(l.unwritten) > 0 {
			if l.syncErr == nil {
				l.dmu.Unlock()
				l.writeUnwritten()
				continue
			}
			// After a failed fsync nothing more is written: they fail too.
			l.failedWs = append(l.failedWs, l.unwritten...)
			l.unwritten, l.unwrittenReqs = nil, 0
		}
		ws := l.unsynced
		l.unsynced = nil
		if len(ws) == 0 {
			l.syncing = false
			l.dmu.Unlock()
			l.reads.Broadcast()
			signal(l.synced)
			signal(l.wake)
			return
		}
		err := l.syncErr
		need := ws[len(ws)-1].to.Offset > l.durable.Offset
		l.dmu.Unlock()
		started := time.Now()
		if err == nil && need {
			err = l.syncLog()
		}
		elapsed := time.Since(started)
		requests, records, appended := 0, 0, 0
		for _, w := range ws {
			requests += len(w.batch)
			records += w.records
			for _, r := range w.batch {
				appended += len(r.res)
			}
		}
		l.dmu.Lock()
		if err != nil {
			// Their writers hear of it once the committer has cut the
			// lines back out of the file, so a failed write leaves nothing.
			if l.syncErr == nil {
				l.syncErr, l.failFrom = err, ws[0].from
			}
			l.failedWs = append(l.failedWs, ws...)
			l.dmu.Unlock()
			continue
		}
		l.setDurable(ws[len(ws)-1].to)
		if need {
			l.stats.Commits++
		}
		l.stats.Appended += uint64(appended)
		durable := l.durable.Seq
		more := len(l.unwritten) > 0 || len(l.unsynced) > 0
		l.dmu.Unlock()
		acked, took = requests, elapsed
		if more {
			// The next batches are waiting for their fsync: start it first
			// and wake these writers meanwhile, on the other core.
			l.loops.Add(1)
			go func() {
				defer l.loops.Done()
				acknowledge(ws)
			}()
		} else {
			acknowledge(ws)
		}
		if records > 0 && l.cfg.Observe != nil {
			l.cfg.Observe(CommitInfo{Requests: requests, Records: records, Fsync: elapsed})
		}
		l.reads.Broadcast()
		if l.checkpointWantedAt(durable, runShare) {
			l.startCheckpoint()
		}
	}
}

// awaitCohort waits, at most bound, until target requests are decided and
// waiting to be written.
func (l *Ledger) awaitCohort(target int, bound time.Duration) {
	if bound <= 0 || l.waiting.Load() > 0 {
		return // readers wait for the disk, and the committer for them
	}
	l.dmu.Lock()
	if l.unwrittenReqs >= target {
		l.dmu.Unlock()
		return
	}
	l.cohortTarget = target
	l.dmu.Unlock()
	timer := time.NewTimer(bound)
	select {
	case <-l.decided:
	case <-timer.C:
	}
	timer.Stop()
	l.dmu.Lock()
	l.cohortTarget = 0
	l.dmu.Unlock()
	select { // a signal that came after the timer: drop it
	case <-l.decided:
	default:
	}
}

// acknowledge tells the writers of durable batches that they are.
func acknowledge(ws []*written) {
	for _, w := range ws {
		for _, r := range w.batch {
			close(r.done)
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
func (l *Ledger) startCheckpoint() {
	l.dmu.Lock()
	if l.cpBusy {
		l.dmu.Unlock()
		return
	}
	l.cpBusy = true
	l.dmu.Unlock()
	l.cpWriters.Add(1)
	go func() {
		defer l.cpWriters.Done()
		defer func() {
			l.dmu.Lock()
			l.cpBusy = false
			l.dmu.Unlock()
		}()
		l.cpWrite.Lock()
		defer l.cpWrite.Unlock()
		// The state is frozen under the lock, then encoded and written
		// without it, so writers go on meanwhile: encoding takes about a
		// microsecond a promise, a second at a million.
		l.mu.Lock()
		l.waitDurableLocked()
		if l.stale || !l.checkpointWantedAt(l.pos.Seq, runShare) {
			l.mu.Unlock()
			return
		}
		l.cpSeq.Store(l.pos.Seq) // claimed: nobody encodes it twice
		pos, head, frozen := l.pos, l.st.snapshotHead(), l.st.Promises.Freeze()
		l.mu.Unlock()
		err := l.writeSnapshot(pos, head, frozen.StreamSnapshot)
		l.mu.Lock()
		frozen.Release()
		l.mu.Unlock()
		if err != nil {
			l.cfg.Logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
		}
	}()
}

// failed reports whether an fsync failed and the log awaits being cut back.
func (l *Ledger) failed() bool {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return l.syncErr != nil
}

// idle reports whether nothing written awaits an fsync.
func (l *Ledger) idle() bool {
	l.dmu.Lock()
	defer l.dmu.Unlock()
	return !l.syncing && len(l.unsynced) == 0 && len(l.unwritten) == 0
}

// drain waits until everything written is durable (or failed).
func (l *Ledger) drain() {
	for !l.idle() {
		<-l.synced
	}
}

// drainAndRelease waits until everything written is durable and releases
// the file lock; if an fsync failed meanwhile, it first cuts the log back.
func (l *Ledger) drainAndRelease() {
	l.drain()
	if l.failed() {
		l.recoverFromSyncFailure()
		return
	}
	l.releaseTx()
}

// recoverFromSyncFailure cuts the log back to before the first batch whose
// fsync failed (every batch after it failed too), so nothing
// unacknowledged stays in the file, and leaves the state to be rebuilt.
func (l *Ledger) recoverFromSyncFailure() {
	l.drain()
	l.dmu.Lock()
	from := l.failFrom
	l.dmu.Unlock()
	if l.tx != nil {
		if err := l.tx.Cut(from); err != nil {
			l.cfg.Logger.Error("ledger: could not cut unacknowledged lines after a failed fsync", "err", err)
		}
	}
	l.releaseTx()
	l.mu.Lock()
	l.stale = true
	l.rebuildLocked()
	l.dmu.Lock()
	err, ws := l.syncErr, l.failedWs
	l.syncErr, l.failedWs = nil, nil
	l.dmu.Unlock()
	l.mu.Unlock()
	l.reads.Broadcast()
	for _, w := range ws {
		for _, r := range w.batch {
			if r.err == nil {
				r.err, r.res = err, nil
			}
			close(r.done)
		}
	}
}

// rebuildLocked refolds the state from the log after a failed write, so
// readers do not see records that are not in it. Called with mu held, the
// tx released and nothing awaiting fsync; if it fails, the state stays
// stale and the next write or Refresh tries again.
func (l *Ledger) rebuildLocked() {
	if err := l.load(); err != nil {
		l.stale = true
		l.cfg.Logger.Error("ledger: could not refold the log after a failed write", "err", err)
	}
}

// releaseTx releases the file lock if the committer holds it.
func (l *Ledger) releaseTx() {
	if l.tx != nil {
		l.tx.Release()
		l.tx = nil
	}
}

// lastLine returns a copy of the final line (without newline) of buf.
func lastLine(buf []byte) []byte {
	end := len(buf) - 1
	start := end
	for start > 0 && buf[start-1] != '\n' {
		start--
	}
	out := make([]byte, end-start)
	copy(out, buf[start:end])
	return out
}
