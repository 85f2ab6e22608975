package server

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
	"tally/timekeeper"
)

// timekeepers runs one timekeeper per open session inside the server, so a
// deployment needs no separate `tally watch` process.
type timekeepers struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	last map[string]time.Time // session → end of its last completed sweep
}

func newTimekeepers() *timekeepers {
	ctx, cancel := context.WithCancel(context.Background())
	return &timekeepers{ctx: ctx, cancel: cancel, last: map[string]time.Time{}}
}

// newTimekeeper is a session's timekeeper as this server configures it:
// its sinks (a webhook, a command) and the A2A lapse delivery to replyTo
// agents, over svc's session call. deliverOnly and now are
// timekeeper.Config's.
func (s *Server) newTimekeeper(ctx context.Context, svc service.Timekeeping, call service.Call, deliverOnly bool, now func() time.Time) (*timekeeper.Timekeeper, error) {
	cfg := s.cfg.Watch
	if cfg.Logger == nil {
		cfg.Logger = s.cfg.Logger
	}
	cfg.DeliverOnly, cfg.Now = deliverOnly, now
	var lapses *timekeeper.A2A
	if !s.cfg.A2A.NoLapseDelivery {
		lapses = s.lapseSink(now)
		cfg.Sinks = append(slices.Clone(cfg.Sinks), lapses)
	}
	w, err := timekeeper.New(ctx, svc, call, cfg)
	if err != nil {
		return nil, err
	}
	if lapses != nil {
		lapses.Journal = w.Journal() // lapses given up are journaled so
	}
	return w, nil
}

// Deliverer is a cluster node's delivery of a session's lapses and promise
// notices (to the webhook, the command and replyTo agents of this
// server's configuration) at the wall clock, committing nothing: the
// group's leader proposes the facts through raft. svc is the node's
// replica's Service.
func (s *Server) Deliverer(ctx context.Context, svc service.Timekeeping, call service.Call) (*timekeeper.Timekeeper, error) {
	return s.newTimekeeper(ctx, svc, call, true, time.Now)
}

// startTimekeeper runs a timekeeper for a newly opened session, if the server
// keeps time, and returns the func that stops it (letting a sweep in
// progress finish) before the session is closed; nil if none runs.
func (s *Server) startTimekeeper(key string, l *ledger.Ledger) func() {
	if s.cfg.WatchEvery <= 0 {
		return nil
	}
	tenant, session, _ := strings.Cut(key, "/")
	svc := ledgerservice.OneSession(l, ledgerservice.Config{Timekeeper: s.cfg.Ledger.Timekeeper})
	w, err := s.newTimekeeper(s.timekeepers.ctx, svc, service.Call{Tenant: tenant, Session: session}, false, l.Now)
	if err != nil {
		s.cfg.Logger.Error("cannot start the watcher for a session", "session", key, "err", err)
		return nil
	}
	ws := s.timekeepers
	ctx, cancel := context.WithCancel(ws.ctx)
	done := make(chan struct{})
	ws.wg.Add(1)
	go func() {
		defer ws.wg.Done()
		defer close(done)
		defer w.Close()
		_ = w.Run(ctx, s.cfg.WatchEvery, func(r timekeeper.Report, err error) {
			if err != nil {
				s.cfg.Logger.Warn("watcher sweep failed", "session", key, "err", err)
				return
			}
			ws.mu.Lock()
			ws.last[key] = time.Now()
			ws.mu.Unlock()
			s.metrics.sweep(r)
		})
	}()
	return func() {
		cancel()
		<-done
		ws.mu.Lock()
		delete(ws.last, key) // a closed session has no lag
		ws.mu.Unlock()
	}
}

// stop ends every timekeeper, letting a sweep in progress finish.
func (ws *timekeepers) stop() {
	ws.cancel()
	ws.wg.Wait()
}

// lag is the longest time since a session's last completed sweep.
func (ws *timekeepers) lag(now time.Time) float64 {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	worst := 0.0
	for _, t := range ws.last {
		if d := now.Sub(t).Seconds(); d > worst {
			worst = d
		}
	}
	return worst
}

var descWatcherLag = prometheus.NewDesc("tally_watcher_lag_seconds",
	"Longest time since a session's watcher last completed a sweep.", nil, nil)
