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
	"tally/promise"
	"tally/store"
	"tally/watch"
)

// Config tunes a server. Start from DefaultConfig.
type Config struct {
	Addr string
	Root string // the ledger directory
	// Insecure serves without tokens: every request acts as the identity in
	// the X-Tally-Actor header, in the tenant of its path. Development only.
	Insecure bool
	Logger   *slog.Logger
	Ledger   ledger.Config
	// BodyMax bounds a request body.
	BodyMax int64
	// ShutdownTimeout bounds the wait for in-flight requests at shutdown.
	ShutdownTimeout time.Duration
	// SessionsMax bounds the sessions open at once.
	SessionsMax int
	// StreamPoll is how often an event stream looks for lines appended by
	// other processes writing the same directory.
	StreamPoll time.Duration
	// WatchEvery is how often the built-in timekeeper sweeps each open
	// session (lapses, claim deadlines, promise notices); 0 disables it.
	WatchEvery time.Duration
	// Watch configures the built-in timekeeper (its sinks: webhook, exec).
	Watch watch.Config
	// A2A tunes the A2A binding (extension URIs, card); zero means defaults.
	A2A A2AConfig
	// Console bounds the console's reads; zero means defaults.
	Console ConsoleConfig
}

// DefaultConfig returns the configuration `tally serve` starts from.
func DefaultConfig() Config {
	return Config{
		Addr: "127.0.0.1:7420", Logger: slog.Default(), Ledger: ledger.DefaultConfig(),
		BodyMax: 1 << 20, ShutdownTimeout: 30 * time.Second, SessionsMax: 4096, StreamPoll: time.Second,
		WatchEvery: 10 * time.Second, Watch: watch.DefaultConfig(),
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Root == "":
		return errors.New("server config: Root is empty")
	case c.BodyMax < 1024:
		return fmt.Errorf("server config: BodyMax %d must be at least 1024", c.BodyMax)
	case c.SessionsMax < 1:
		return fmt.Errorf("server config: SessionsMax %d must be at least 1", c.SessionsMax)
	case c.Logger == nil:
		return errors.New("server config: Logger is nil")
	}
	return c.Ledger.Validate()
}

// Server serves one ledger directory.
type Server struct {
	cfg     Config
	tokens  *auth.Store
	metrics *metrics
	mux     *http.ServeMux
	routes  []route

	watchers *watchers

	mu       sync.Mutex
	sessions map[string]*ledger.Ledger
	closed   bool

	// digesters keeps request-digest hashers for reuse: making one (the key
	// derivation and the hasher's buffers) allocates about 11 KB.
	digesters sync.Pool

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
	s := &Server{cfg: cfg, tokens: auth.Open(cfg.Root), sessions: map[string]*ledger.Ledger{}, watchers: newWatchers()}
	s.metrics = newMetrics(s)
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
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
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

// Close stops the watchers and closes every open session.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.watchers.stop()
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for k, l := range s.sessions {
		errs = append(errs, l.Close())
		delete(s.sessions, k)
	}
	return errors.Join(errs...)
}

// session opens (once) the ledger of tenant/session.
func (s *Server) session(tenant, session string) (*ledger.Ledger, error) {
	// An open session answers without checking its names again: only valid
	// names, which hold no slash, are ever keys, so a hit is that session.
	s.mu.Lock()
	if l, ok := s.sessions[tenant+"/"+session]; ok && !s.closed {
		s.mu.Unlock()
		return l, nil
	}
	s.mu.Unlock()
	dir, err := store.SessionDir(s.cfg.Root, tenant, session)
	if err != nil {
		return nil, badRequest{err.Error()}
	}
	key := tenant + "/" + session
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("server is shutting down")
	}
	if l, ok := s.sessions[key]; ok {
		return l, nil
	}
	if len(s.sessions) >= s.cfg.SessionsMax {
		return nil, fmt.Errorf("sessions: at most %d open at once", s.cfg.SessionsMax)
	}
	l, err := ledger.Open(dir, s.cfg.Ledger)
	if err != nil {
		return nil, err
	}
	s.sessions[key] = l
	s.startWatcher(key, l)
	return l, nil
}

// eachSession visits the open sessions (for metrics).
func (s *Server) eachSession(fn func(key string, l *ledger.Ledger)) {
	s.mu.Lock()
	ls := make(map[string]*ledger.Ledger, len(s.sessions))
	for k, l := range s.sessions {
		ls[k] = l
	}
	s.mu.Unlock()
	for k, l := range ls {
		fn(k, l)
	}
}
