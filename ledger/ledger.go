// Package ledger joins the durable log (store) and the pure semantics of the
// families (promise, claim, expect): it opens a session, gives the store's
// group commit (store.Pipeline) its folded state as the machine that decides
// commands under the log's lock and folds their records, and answers queries
// from that state.
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
	"time"

	"tally/claim"
	"tally/expect"
	"tally/jsonline"
	"tally/promise"
	"tally/store"
)

// Config tunes a ledger. The zero value is not valid: start from
// DefaultConfig.
type Config struct {
	Limits promise.Limits
	// Now is the clock used to stamp new records. Reads never use it:
	// views take now as an argument.
	Now    func() time.Time
	Logger *slog.Logger
	// CommitConfig tunes the group commit: batch and queue bounds, the
	// cohort wait, the lock timeout, checkpoint thresholds and the commit
	// observer (store.CommitConfig documents each).
	store.CommitConfig
	// Timekeeper is the identity of the timekeeper: the only one that commits
	// lapses and deadline facts.
	Timekeeper string
	// LineageMax bounds an expectation's lineage of extensions (past it only
	// a person extends).
	LineageMax int
	// IdempotencyWindow is how long a request id's response is retained; a
	// retry older than that is refused (RequestHistoryExpired), never run again.
	IdempotencyWindow time.Duration
	// MintID, if set, mints the promise ids a declaration without one gets,
	// in place of the ledger's own generator: a cluster replica mints the
	// ids its proposer fixed, so every replica writes the same record.
	MintID func() string
	// SyncByCaller leaves the fsync of each write to the caller (Sync): a
	// write is settled once written. A cluster replica syncs its sessions
	// once per batch it applies: a quorum's raft logs, not the session log,
	// made the write durable, and a replica cuts an unsynced tail back and
	// applies it again after a crash.
	SyncByCaller bool
}

// CommitInfo describes one group commit.
type CommitInfo = store.CommitInfo

// Stats counts what the ledger has done since it was opened.
type Stats = store.Stats

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

// DefaultTimekeeper is the timekeeper's identity unless configured
// otherwise: the only identity that may commit deadline, deadlock and lapse
// facts. Stored as the actor of those facts: do not change it.
const DefaultTimekeeper = "tally/timekeeper"

// DefaultConfig returns the configuration the CLI and server use.
func DefaultConfig() Config {
	return Config{
		Limits: promise.DefaultLimits(), Now: time.Now, Logger: slog.Default(),
		CommitConfig: store.DefaultCommitConfig(),
		Timekeeper:   DefaultTimekeeper, LineageMax: expect.DefaultConfig().LineageMax,
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
	case c.Timekeeper == "":
		return errors.New("ledger config: Timekeeper is empty")
	case c.IdempotencyWindow <= 0:
		return fmt.Errorf("ledger config: IdempotencyWindow %v must be positive", c.IdempotencyWindow)
	}
	if err := c.CommitConfig.Validate(); err != nil {
		return fmt.Errorf("ledger config: %w", err)
	}
	if err := c.expectConfig().Validate(); err != nil {
		return fmt.Errorf("ledger config: %w", err)
	}
	return nil
}

// Ledger is one open session: the log's group commit (store.Pipeline) with
// the folded state as its machine. It is safe for concurrent use. The
// pipeline's lock guards st: it is read only inside Read (or a write's
// decide and render), and replaced only by the pipeline's Reset and Restore.
type Ledger struct {
	cfg  Config
	log  *store.Log
	pipe *store.Pipeline
	st   *State

	syncLog func() error  // the log's fsync; tests put faults in its way
	spread  func() string // mints a promise id outside the lock (spreadID; tests force collisions)

	ids *mrand.ChaCha8 // id minting; used only under the pipeline's lock
}

// Changed returns a channel closed the next time the ledger's durable
// position moves (a commit here, or a Refresh that folded lines from
// elsewhere).
func (l *Ledger) Changed() <-chan struct{} { return l.pipe.Changed() }

// Durable is the end of what this ledger knows to be durable: its own
// acknowledged lines and those folded from other processes.
func (l *Ledger) Durable() store.Position { return l.pipe.Durable() }

// Stats returns the counters.
func (l *Ledger) Stats() Stats { return l.pipe.Stats() }

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
	l.syncLog = lg.Sync
	if cfg.SyncByCaller {
		l.syncLog = func() error { return nil }
	}
	l.spread = spreadID
	if cfg.MintID != nil {
		l.spread = cfg.MintID
	}
	l.pipe, err = store.NewPipeline(cfg.CommitConfig, hookedLog{lg, l}, machine{l}, cfg.Logger)
	if err != nil {
		lg.Close()
		return nil, err
	}
	return l, nil
}

// hookedLog is the session log with its fsync taken through l.syncLog, so
// tests can put faults in its way.
type hookedLog struct {
	*store.Log
	l *Ledger
}

func (h hookedLog) Sync() error { return h.l.syncLog() }

// Close waits for the writes under way, leaves a checkpoint the next open
// can start from, and releases the session's files.
func (l *Ledger) Close() error {
	l.pipe.Close()
	return l.log.Close()
}

// Sync makes every write settled so far durable: with SyncByCaller, the
// caller's fsync.
func (l *Ledger) Sync() error { return l.log.Sync() }

// Hold has the ledger's writes, until Unhold, decided and folded one by
// one but written to the log together, under one lock, at Unhold (or when
// a read needs them): for a caller that is the ledger's only writer and
// makes its writes durable itself (SyncByCaller), such as a cluster
// replica applying a batch (store.Pipeline.Hold). A write returns once
// decided; Unhold's error fails every write since Hold.
func (l *Ledger) Hold() { l.pipe.Hold() }

// Unhold writes what the ledger decided since Hold and releases the log's
// lock (store.Pipeline.Unhold).
func (l *Ledger) Unhold() error { return l.pipe.Unhold() }

// Log is the underlying store.
func (l *Ledger) Log() *store.Log { return l.log }

// Refresh folds lines other processes appended since the last look. It
// takes no file lock: readers never block writers.
func (l *Ledger) Refresh() error { return l.pipe.Refresh() }

// Checkpoint writes a checkpoint at the current position now.
func (l *Ledger) Checkpoint() error { return l.pipe.Checkpoint() }

// Position is the end of what has been folded and is durable.
func (l *Ledger) Position() store.Position { return l.pipe.Position() }

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
		if pp.p.Recorded() {
			return nil, warn, nil // an identical assessment: nothing to append
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
	if err != nil || len(res) == 0 {
		return Result{}, err // none: an identical assessment, recorded already
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
// log's lock, so two timekeepers sweeping at once never record a fact twice.
func (l *Ledger) Sweep(ctx context.Context, max int) ([]Result, error) {
	return l.submit(ctx, &request{opts: WriteOptions{Actor: l.cfg.Timekeeper}, decide: func(st *State, now time.Time) ([]pending, []string, error) {
		return encodeWith(expectFamily(st), st.Expects.Sweep(now, max), nil), nil, nil
	}})
}

// MintID returns a fresh promise id in pinki's shape: pnk_ and 6 hex digits.
// Uniqueness is checked under the log's lock; the ids need to be spread, not
// secret, so a seeded generator serves (one system call per ledger, not per id).
func (l *Ledger) mintID() string {
	if l.cfg.MintID != nil {
		return l.cfg.MintID()
	}
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

// submit queues req on the pipeline and waits until it is settled: the
// first writer to find no commit in progress commits its own batch, so
// concurrent writers share one lock and few fsyncs.
func (l *Ledger) submit(ctx context.Context, req *request) ([]Result, error) {
	req.done = make(chan struct{})
	if err := l.pipe.Submit(ctx, req); err != nil {
		return nil, err
	}
	<-req.done // commits are bounded by LockTimeout; the result is always delivered
	return req.res, req.err
}

// Settle ends the request (store.Request): a failure of the pipeline
// replaces the request's own outcome unless keep is set and it has one.
func (r *request) Settle(err error, keep bool) {
	if err != nil && (!keep || r.err == nil) {
		r.err, r.res = err, nil
	}
	close(r.done)
}

// Settled reports whether Settle has run.
func (r *request) Settled() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// appendLocked appends the records one request decided and folds them into
// the state. Called under the pipeline's lock with the tx caught up.
func (l *Ledger) appendLocked(tx store.Appender, r *request, recs []pending, warn []string, now time.Time) {
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
		if !jsonline.Valid(r.response) || bytes.IndexByte(r.response, '\n') >= 0 {
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
