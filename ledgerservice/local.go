// Package ledgerservice is the Service on this machine's ledgers: Local
// runs every verb of service.Service on the sessions its Sessions opens
// (the CLI's ledger directory, the server's session cache, a cluster
// replica's own sessions). It is named for what it holds, the one
// implementation of the seam over ledger, store and artifact, so that the
// seam itself and every binding that only calls it (the REST client, MCP
// over a client) compile none of them.
package ledgerservice

import (
	"cmp"

	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/zeebo/blake3"

	"tally/ledger"
	"tally/refuse"
	"tally/service"
)

// Sessions opens the ledger of a session for Local. Its implementation
// decides how long the ledger stays open: the server holds it for the
// request (ctx) and caches it; the CLI holds it for the process.
type Sessions interface {
	// Open returns the ledger of tenant/session. A session without a log is
	// created only when create is set (a write); otherwise Open refuses
	// with store's NoSuchSession error and touches nothing.
	Open(ctx context.Context, tenant, session string, create bool) (*ledger.Ledger, error)
}

// SessionVisitor is a Sessions that can hold a session for one call and
// release it at once (the server's cache, whose open bound a verify of
// every session must keep). Local verifies through such a session's open
// ledger; through any other Sessions it verifies a log bare, unfolded, so a
// log too damaged to open is reported rather than refused.
type SessionVisitor interface {
	Visit(ctx context.Context, tenant, session string, fn func(*ledger.Ledger)) error
}

// Config is what Local needs besides its sessions.
type Config struct {
	// Now is the clock: a write's time, the time its response's views are
	// computed at, and a read's when its Call gives none. Nil means
	// time.Now. It should be the ledgers' own clock (ledger.Config.Now).
	Now func() time.Time
	// Timekeeper is the identity the ledgers' timekeeper acts as
	// (ledger.Config.Timekeeper).
	Timekeeper string
	// Root finds the ledger directory the sessions are in, when a verb
	// needs it (the CLI finds it lazily); nil means none.
	Root func() (string, error)
	// RelativeLogs names logs relative to the ledger directory in answers
	// (a server: a client learns which session's file is damaged, not where
	// the server keeps it).
	RelativeLogs bool
	// TargetsVerified says a check's target was verified before the
	// command reached Local (a cluster node's proposer does it against its
	// own copy, CheckTarget), so BeginCheck and ReportCheck append without
	// reading the bytes: a replica's decision must not depend on its disk.
	TargetsVerified bool
	// MintExpectationID mints the id of an expectation raised without
	// one; nil means a random one (api.MintExpectationID). A cluster
	// replica gives its own, drawn from the command's seed, so that every
	// replica raises the expectation under the same id.
	MintExpectationID func() string
	// FeedPoll is how often Changes looks for lines other processes
	// appended; zero means FeedPollDefault.
	FeedPoll time.Duration
	// Stopped, when set, ends every Changes feed once it says so (a
	// server closing); it is asked every FeedPoll.
	Stopped func() bool
}

// Local is the Service on this machine's ledgers, opened through its
// Sessions: the CLI's ledger directory, or the server's session cache.
type Local struct {
	sessions     Sessions
	now          func() time.Time
	timekeeper   string
	rootOf       func() (string, error)
	relativeLogs bool
	// targetsVerified: Config.TargetsVerified.
	targetsVerified bool
	// mintExpectationID: Config.MintExpectationID.
	mintExpectationID func() string
	// feedPoll, stopped: Config.FeedPoll, Config.Stopped.
	feedPoll time.Duration
	stopped  func() bool
	// digesters keeps request-digest hashers for reuse: deriving the key
	// costs more than hashing a document.
	digesters sync.Pool
}

// New is the Service on the ledgers sessions opens.
func New(sessions Sessions, cfg Config) *Local {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	l := &Local{sessions: sessions, now: cfg.Now, timekeeper: cfg.Timekeeper, rootOf: cfg.Root, relativeLogs: cfg.RelativeLogs,
		targetsVerified: cfg.TargetsVerified, mintExpectationID: cfg.MintExpectationID,
		feedPoll: cmp.Or(cfg.FeedPoll, FeedPollDefault), stopped: cfg.Stopped}
	if l.stopped == nil {
		l.stopped = func() bool { return false }
	}
	return l
}

// Now is Local's clock.
func (s *Local) Now() time.Time { return s.now() }

// at is the instant a read of c computes its views at: c.Now, else the clock.
func (s *Local) at(c service.Call) time.Time {
	if !c.Now.IsZero() {
		return c.Now.UTC()
	}
	return s.now().UTC()
}

// write is one write a method runs through execute.
type write struct {
	// method and doc are what a request id is bound to: the method's name
	// and the api document as the caller gave it.
	method string
	doc    any
	cmd    ledger.Command
	// render makes the response document from the state the write left,
	// under the session lock, as the write is decided. Without it (and
	// without a request id, which needs it) the caller answers from the
	// records execute returns.
	render func(st *ledger.State, res []ledger.Result) []byte
}

// execute runs w in c's session (creating it), idempotently when c names a
// request id: the first execution's response document is recorded in the
// same fsync as its records, and a retry with the same id and the same
// document gets it back, byte for byte, with Replayed set, appending nothing.
func (s *Local) execute(ctx context.Context, c service.Call, w write) (service.Doc, []ledger.Result, error) {
	if len(c.RequestID) > service.RequestIDMax {
		return service.Doc{}, nil, refuse.Invalidf("request_id", fmt.Sprintf("at most %d bytes", service.RequestIDMax))
	}
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, true)
	if err != nil {
		return service.Doc{}, nil, err
	}
	opts := ledger.WriteOptions{Actor: c.Actor, RequestID: c.RequestID, Render: w.render}
	var idem *ledger.Idempotency
	if c.RequestID != "" {
		digest, err := s.digest(w.method, w.doc)
		if err != nil {
			return service.Doc{}, nil, err
		}
		idem = &ledger.Idempotency{Principal: c.Actor, Key: c.RequestID, Digest: digest, Render: w.render}
	}
	res, resp, replayed, err := l.Execute(ctx, w.cmd, opts, idem)
	if err != nil {
		return service.Doc{}, nil, err
	}
	if len(resp) > 0 && resp[len(resp)-1] != '\n' {
		resp = append(resp[:len(resp):len(resp)], '\n')
	}
	return service.Doc{JSON: resp, Replayed: replayed}, res, nil
}

// digest binds a request id to what it asked: the method's name and the
// api document, canonical (encoding/json of the document's type: members
// in declaration order, meta compacted; an import's lines as they are), so
// a retry through any binding (CLI, REST, a client) matches the first
// execution.
func (s *Local) digest(method string, doc any) ([32]byte, error) {
	b, ok := doc.([]byte) // lines as given (an import)
	if !ok {
		var err error
		if b, err = json.Marshal(doc); err != nil {
			return [32]byte{}, fmt.Errorf("request digest: %s: %w", method, err)
		}
	}
	h, ok := s.digesters.Get().(*blake3.Hasher)
	if !ok {
		h = blake3.NewDeriveKey("tally 2026-12 service request digest v1")
	}
	defer s.digesters.Put(h)
	h.Reset()
	fmt.Fprintf(h, "%s\n%d\n", method, len(b))
	h.Write(b)
	var sum [32]byte
	h.Sum(sum[:0])
	return sum, nil
}

// read opens c's session for a read (never creating it) with what other
// processes appended to its log folded.
func (s *Local) read(ctx context.Context, c service.Call) (*ledger.Ledger, error) {
	l, err := s.sessions.Open(ctx, c.Tenant, c.Session, false)
	if err != nil {
		return nil, err
	}
	if err := l.Refresh(); err != nil {
		return nil, err
	}
	return l, nil
}

// OneSession is the Service on one open ledger, whatever session a call
// names: for a process that holds a session's ledger itself (the CLI's
// timekeeper, a server's per-session timekeeper, which must not reopen it
// through a cache that closes it only after stopping the timekeeper).
// cfg.Now nil means the ledger's clock.
func OneSession(l *ledger.Ledger, cfg Config) *Local {
	if cfg.Now == nil {
		cfg.Now = l.Now
	}
	return New(oneSession{l}, cfg)
}

type oneSession struct{ l *ledger.Ledger }

func (o oneSession) Open(context.Context, string, string, bool) (*ledger.Ledger, error) {
	return o.l, nil
}
