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
	"runtime"
	"slices"
	"sync"
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
	// a new one worth writing; the threshold also grows with the log (one
	// eighth of it), so checkpoint cost stays amortised O(1) per line.
	CheckpointMin uint64
	// BatchMax bounds the commands one group commit carries.
	BatchMax int
	// BatchLinger bounds how long the committer waits for just-acknowledged
	// writers to come back before committing the next batch.
	BatchLinger time.Duration
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

// DefaultConfig returns the configuration the CLI and server use.
func DefaultConfig() Config {
	return Config{
		Limits: promise.DefaultLimits(), Now: time.Now, Logger: slog.Default(),
		CheckpointMin: 2048, BatchMax: 1024, BatchLinger: 300 * time.Microsecond, LockTimeout: 30 * time.Second,
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
type Ledger struct {
	cfg Config
	log *store.Log

	mu    sync.Mutex // guards st, pos, cpSeq, stale
	st    *State
	pos   store.Position
	cpSeq uint64
	stale bool // st holds records whose commit failed: rebuild before use

	qmu        sync.Mutex // guards queue, committing
	queue      []*request
	committing bool
	recent     [8]int // sizes of the last batches; used only by the committer
	recentAt   int

	stats Stats          // guarded by mu
	ids   *mrand.ChaCha8 // id minting; used only under mu

	cpWriters sync.WaitGroup // background checkpoint writes, joined by Close
	loops     sync.WaitGroup // the commit loop, joined by Close
	cpWrite   sync.Mutex     // one checkpoint file write at a time, in order
	notify    chan struct{}  // closed and replaced at each change of pos; guarded by mu
}

// Changed returns a channel closed the next time the ledger's position
// moves (a commit here, or a Refresh that folded lines from elsewhere).
func (l *Ledger) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.notify == nil {
		l.notify = make(chan struct{})
	}
	return l.notify
}

// moved wakes waiters after pos changed. Called with mu held.
func (l *Ledger) moved() {
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
	l.mu.Lock()
	defer l.mu.Unlock()
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
	l := &Ledger{cfg: cfg, log: lg, ids: mrand.NewChaCha8(seed)}
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
	return l.log.Close()
}

// Log is the underlying store.
func (l *Ledger) Log() *store.Log { return l.log }

// load rebuilds the state from the checkpoint (if it matches) and the tail.
// Called with l.mu held.
func (l *Ledger) load() error {
	l.st, l.pos, l.cpSeq, l.stale = newState(l.cfg), store.Position{}, 0, false
	if pos, payload, verify, err := l.log.ReadCheckpointAsync(); err == nil {
		// Decode while the checksum is computed; trust neither until both hold.
		st, derr := readSnapshot(l.cfg, payload, l.log)
		switch verr := verify(); {
		case verr != nil:
			l.cfg.Logger.Warn("ignoring a damaged checkpoint; folding the log", "err", verr)
		case derr != nil:
			l.cfg.Logger.Warn("ignoring a checkpoint that does not decode; folding the log", "err", derr)
		default:
			l.st, l.pos, l.cpSeq = st, pos, pos.Seq
		}
	} else if !errors.Is(err, store.ErrNoCheckpoint) {
		return err
	}
	if err := l.refreshLocked(); err != nil {
		return err
	}
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
		l.moved()
	}
	return err
}

// checkpointDue encodes a checkpoint when the log has grown enough since the
// last one, returning the payload to write (nil if none is due). Called with
// mu held; the file is written by writeCheckpoint without it, so writers are
// not held up by the disk.
func (l *Ledger) checkpointDue() (store.Position, []byte) {
	since := l.pos.Seq - l.cpSeq
	if since < l.cfg.CheckpointMin || since < l.cpSeq/8 {
		return store.Position{}, nil
	}
	// Claim it now, so concurrent committers do not encode it twice.
	l.cpSeq = l.pos.Seq
	return l.pos, l.st.appendSnapshot(make([]byte, 0, 256*l.st.Promises.Len()+64))
}

func (l *Ledger) writeCheckpoint(pos store.Position, payload []byte) {
	if payload == nil {
		return
	}
	if err := l.log.WriteCheckpoint(pos, payload); err != nil {
		l.cfg.Logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
	}
}

func (l *Ledger) maybeCheckpointLocked() {
	l.writeCheckpoint(l.checkpointDue())
}

// Checkpoint writes a checkpoint at the current position now.
func (l *Ledger) Checkpoint() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	payload := l.st.appendSnapshot(nil)
	if err := l.log.WriteCheckpoint(l.pos, payload); err != nil {
		return err
	}
	l.cpSeq = l.pos.Seq
	return nil
}

// Read calls fn with the current state and position. fn must not keep
// references past its return or modify the state.
func (l *Ledger) Read(fn func(st *State, pos store.Position)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fn(l.st, l.pos)
}

// Position is the end of what has been folded.
func (l *Ledger) Position() store.Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos
}

// WriteOptions carry what a write knows beyond its command.
type WriteOptions struct {
	Actor     string
	RequestID string
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
	opts     WriteOptions
	decide   func(st *State, now time.Time) ([]pending, []string, error)
	idem     *Idempotency
	res      []Result
	response []byte // the recorded response of an idempotent request
	replayed bool   // the response is a retry's: nothing was appended
	err      error
	done     chan struct{}
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
// batches, so concurrent writers share one lock and one fsync.
func (l *Ledger) submit(ctx context.Context, req *request) ([]Result, error) {
	req.done = make(chan struct{})
	l.qmu.Lock()
	l.queue = append(l.queue, req)
	if l.committing {
		l.qmu.Unlock()
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

// commitLoop commits queued requests until the queue is empty.
func (l *Ledger) commitLoop() { l.commitLoopN(0) }

// commitLoopN commits queued requests in batches until the queue is empty
// or, with inline > 0, after that many batches, handing what is still
// queued to a commit loop in its own goroutine. l.committing is true on
// entry and owned by the loop; l.loops counts it.
func (l *Ledger) commitLoopN(inline int) {
	defer l.loops.Done()
	var inflight []*request
	defer func() {
		// A panic in a commit is a broken invariant. It must neither wedge
		// later writers nor take the process down: fail the batch, rebuild
		// the state from the log before the next write, and say so loudly.
		if p := recover(); p != nil {
			l.cfg.Logger.Error("ledger: internal error in a commit; the batch failed and the state will be rebuilt from the log", "panic", fmt.Sprint(p))
			l.mu.Lock()
			l.stale = true
			l.mu.Unlock()
			for _, r := range inflight {
				select {
				case <-r.done:
				default:
					r.err, r.res = fmt.Errorf("ledger: internal error: %v", p), nil
					close(r.done)
				}
			}
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
		l.qmu.Lock()
		n := min(len(l.queue), l.cfg.BatchMax)
		if n == 0 {
			l.committing = false
			l.qmu.Unlock()
			return
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
		inflight = batch
		l.commit(context.Background(), batch)
		inflight = nil
		// The writers just acknowledged usually come straight back. Give
		// them a moment to join the next batch, instead of forming a second,
		// smaller cohort that doubles the fsyncs: wait until the queue holds
		// as many as the largest recent batch, at most BatchLinger. A lone
		// writer (recent batches of one) never waits.
		l.recent[l.recentAt%len(l.recent)] = len(batch)
		l.recentAt++
		if target := slices.Max(l.recent[:]); target >= 2 {
			l.linger(target)
		}
	}
}

// linger yields until target writers are queued, bounded by BatchLinger.
func (l *Ledger) linger(target int) {
	deadline := time.Now().Add(l.cfg.BatchLinger)
	for time.Now().Before(deadline) {
		l.qmu.Lock()
		n := len(l.queue)
		l.qmu.Unlock()
		if n >= target {
			return
		}
		runtime.Gosched()
	}
}

// commit carries one batch through lock, catch-up, decide, append, fsync.
func (l *Ledger) commit(ctx context.Context, batch []*request) {
	finish := func(err error) {
		for _, r := range batch {
			if err != nil && r.err == nil {
				r.err, r.res = err, nil
			}
			close(r.done)
		}
	}
	lockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.LockTimeout)
	defer cancel()
	tx, err := l.log.Begin(lockCtx)
	if err != nil {
		finish(err)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stale {
		if err := l.load(); err != nil {
			tx.Abort()
			finish(err)
			return
		}
	}
	pos, err := tx.CatchUp(l.pos, l.st.apply)
	l.pos = pos
	if err != nil {
		tx.Abort()
		finish(err)
		return
	}
	now := l.cfg.Now()
	accepted := 0
	for _, r := range batch {
		if l.checkIdempotency(r, now) {
			continue
		}
		recs, warn, err := r.decide(l.st, now)
		if err != nil {
			r.err = err
			l.stats.Refused++
			continue
		}
		if len(recs) == 0 {
			continue // nothing to do (a sweep with nothing due)
		}
		r.res = make([]Result, 0, len(recs))
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
			line := tx.Lines()
			line = lastLine(line)
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
		if r.err == nil {
			accepted++
		}
	}
	if accepted == 0 {
		tx.Abort()
		finish(nil)
		return
	}
	records := int(tx.Pending().Seq - l.pos.Seq)
	started := time.Now()
	pos, err = tx.Commit()
	if err != nil {
		l.stale = true // the state folded records that are not on disk
		finish(err)
		return
	}
	if l.cfg.Observe != nil {
		l.cfg.Observe(CommitInfo{Requests: len(batch), Records: records, Fsync: time.Since(started)})
	}
	l.pos = pos
	l.moved()
	l.stats.Commits++
	for _, r := range batch {
		l.stats.Appended += uint64(len(r.res))
	}
	cpPos, cp := l.checkpointDue()
	finish(nil)
	if cp != nil {
		// The file is written in the background so the next batch does not
		// wait for the disk; at most one such write runs at a time, and
		// Close waits for it.
		l.cpWriters.Add(1)
		go func() {
			defer l.cpWriters.Done()
			l.cpWrite.Lock()
			defer l.cpWrite.Unlock()
			l.writeCheckpoint(cpPos, cp)
		}()
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
