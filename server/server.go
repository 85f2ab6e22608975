// Package server is `tally serve`: the ledger as an HTTP service. Many
// sessions (tenant/session) in one process on the embedded store; every
// write authenticated by a bearer token and authorized by the pure core from
// that identity; idempotent by request id; a live event stream; metrics.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/auth"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/promise"
	"tally/service"
	"tally/store"
	"tally/timekeeper"
)

// Config tunes a server. Start from DefaultConfig.
type Config struct {
	Addr string
	Root string // the ledger directory
	// Insecure serves without tokens: every request acts as the identity in
	// the X-Tally-Actor header, in the tenant of its path. Development only.
	Insecure bool
	// Tokens keeps the bearer tokens; nil means the ledger directory's
	// tokens file (a cluster node's are its meta group's).
	Tokens auth.Keeper
	Logger *slog.Logger
	Ledger ledger.Config
	// BodyMax bounds a request body.
	BodyMax int64
	// MaxArtifactBytes bounds the bytes of one artifact or evidence
	// upload (serve --max-artifact-bytes): one declared past it is refused
	// (413 ArtifactTooLarge) before a byte is staged, one streamed past it
	// is cut there and what it staged removed.
	MaxArtifactBytes int64
	// ReadHeaderTimeout bounds the time a client may take to send a
	// request's headers; BodyTimeout, its body (from the end of the
	// headers); IdleTimeout, the wait for the next request on a kept-alive
	// connection. A slow client cannot hold a handler or a connection
	// longer.
	ReadHeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// ShutdownTimeout bounds the wait for in-flight requests at shutdown.
	ShutdownTimeout time.Duration
	// SessionsOpen bounds the sessions kept open (each holds four files
	// and a timekeeper): past it the least recently used idle ones are
	// closed, and reopened on their next request. Sessions in use are never
	// closed, so the bound is exceeded while more than it are in use.
	SessionsOpen int
	// TenantSessionsMax bounds the sessions of one tenant on disk: a write
	// that would create one more is refused (SessionQuotaExceeded).
	TenantSessionsMax int
	// StreamPoll is how often an event stream looks for lines appended by
	// other processes writing the same directory.
	StreamPoll time.Duration
	// WatchEvery is how often the built-in timekeeper sweeps each open
	// session (lapses, claim deadlines, promise notices); 0 disables it.
	WatchEvery time.Duration
	// Watch configures the built-in timekeeper (its sinks: webhook, exec).
	Watch timekeeper.Config
	// A2A tunes the A2A binding (extension URIs, card); zero means defaults.
	A2A A2AConfig
	// Console bounds the console's reads; zero means defaults.
	Console ConsoleConfig
	// ScrubRate bounds the bytes a second the scrubber re-reads (0: no
	// scrubbing); ScrubEvery is the wait from one pass's start to the
	// next's.
	ScrubRate  int64
	ScrubEvery time.Duration
	// CollectGrace is how long bytes no record references are kept after
	// their last upload; CollectEvery, how often a server collects them (0:
	// never).
	CollectGrace, CollectEvery time.Duration
}

// DefaultConfig returns the configuration `tally serve` starts from.
func DefaultConfig() Config {
	return Config{
		Addr: "127.0.0.1:7420", Logger: slog.Default(), Ledger: ledger.DefaultConfig(),
		BodyMax: 1 << 20, MaxArtifactBytes: DefaultMaxArtifactBytes, ReadHeaderTimeout: 10 * time.Second, BodyTimeout: time.Minute, IdleTimeout: 2 * time.Minute, ShutdownTimeout: 30 * time.Second, SessionsOpen: 1024, TenantSessionsMax: 10000, StreamPoll: time.Second,
		WatchEvery: 10 * time.Second, Watch: timekeeper.DefaultConfig(),
		ScrubRate: DefaultScrubRate, ScrubEvery: DefaultScrubEvery, CollectGrace: DefaultCollectGrace, CollectEvery: DefaultCollectEvery,
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Root == "":
		return errors.New("server config: Root is empty")
	case c.BodyMax < 1024:
		return fmt.Errorf("server config: BodyMax %d must be at least 1024", c.BodyMax)
	case c.ScrubRate < 0 || c.ScrubEvery < 0 || c.CollectGrace < 0 || c.CollectEvery < 0:
		return fmt.Errorf("server config: ScrubRate %d, ScrubEvery %v, CollectGrace %v and CollectEvery %v must not be negative", c.ScrubRate, c.ScrubEvery, c.CollectGrace, c.CollectEvery)
	case c.MaxArtifactBytes < 1:
		return fmt.Errorf("server config: MaxArtifactBytes %d must be at least 1", c.MaxArtifactBytes)
	case c.ReadHeaderTimeout <= 0 || c.BodyTimeout <= 0 || c.IdleTimeout <= 0:
		return fmt.Errorf("server config: ReadHeaderTimeout %v, BodyTimeout %v and IdleTimeout %v must be positive", c.ReadHeaderTimeout, c.BodyTimeout, c.IdleTimeout)
	case c.SessionsOpen < 1:
		return fmt.Errorf("server config: SessionsOpen %d must be at least 1", c.SessionsOpen)
	case c.TenantSessionsMax < 1:
		return fmt.Errorf("server config: TenantSessionsMax %d must be at least 1", c.TenantSessionsMax)
	case c.Logger == nil:
		return errors.New("server config: Logger is nil")
	}
	return c.Ledger.Validate()
}

// Server serves one ledger directory.
type Server struct {
	cfg     Config
	tokens  auth.Keeper
	metrics *metrics
	custody custody
	mux     *http.ServeMux
	routes  []route

	timekeepers *timekeepers

	mu       sync.Mutex // guards closed and the session cache
	sessions *sessionCache
	closed   bool

	// local is the Service the REST and A2A bindings run verbs through,
	// on the sessions of the cache.
	local service.Service
	// browse is what the console reads besides the verbs (session lists,
	// a record's history), through the seam, over this server's own
	// sessions: on a cluster node its replica's files as applied, as the
	// console has always read them there (so it is not the node's Service).
	browse service.Browse
	// feed is the change feed a subscribed MCP resource hears, over the
	// same sessions as browse.
	feed service.Feed
	// replicated: local is a cluster node's (NewCluster), where a write's
	// outcome can be unknown; MCP's tools then give a write a request id
	// of their own and retry it.
	replicated bool

	// stubWrite, set only by tests, answers a promise write in place of the
	// ledger: the write benchmark's baseline, the server's own cost.
	stubWrite func(cmd promise.Command, p principal) []byte
}

// New returns a server over cfg.Root, which must be a ledger directory.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !store.IsLedger(cfg.Root) {
		return nil, fmt.Errorf("%s is not a tally ledger: run `tally init --dir %s` first", cfg.Root, cfg.Root)
	}
	sessions, err := loadSessions(cfg.Root)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, tokens: cfg.Tokens, sessions: sessions, timekeepers: newTimekeepers()}
	if s.tokens == nil {
		s.tokens = auth.Open(cfg.Root)
	}
	s.metrics = newMetrics(s)
	s.custody.register(s.metrics.reg)
	local := ledgerservice.New(serverSessions{s}, ledgerservice.Config{
		Now: func() time.Time { return s.cfg.Ledger.Now() }, Timekeeper: cfg.Ledger.Timekeeper,
		Root: func() (string, error) { return cfg.Root, nil }, RelativeLogs: true,
		FeedPoll: cfg.StreamPoll, Stopped: s.isClosed})
	s.local, s.browse, s.feed = local, local, local
	observe := cfg.Ledger.Observe
	s.cfg.Ledger.Observe = func(ci ledger.CommitInfo) {
		s.metrics.commit(ci)
		if observe != nil {
			observe(ci)
		}
	}
	s.routes = s.routeTable()
	s.mux = http.NewServeMux()
	for _, r := range s.routes {
		s.mux.Handle(r.method+" "+r.pattern, s.instrument(r))
	}
	return s, nil
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Registry is the server's Prometheus registry.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// Serve listens on cfg.Addr until ctx ends, then shuts down gracefully:
// it stops accepting, finishes in-flight requests (their writes complete),
// and closes every session.
func (s *Server) Serve(ctx context.Context, ready func(addr string)) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if s.cfg.Insecure {
		s.cfg.Logger.Warn("serving WITHOUT authentication (--insecure-dev): any client may act as any identity")
	}
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, IdleTimeout: s.cfg.IdleTimeout, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	s.startCustody(ctx)
	s.cfg.Logger.Info("tally serving", "addr", ln.Addr().String(), "dir", s.cfg.Root)
	if ready != nil {
		ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		s.Close()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	err = hs.Shutdown(sctx)
	s.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Close stops the timekeepers and closes every open session.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.timekeepers.stop()
	return s.closeSessions()
}
