package cli

// The CLI's one Service: Local on the ledger directory, or with TALLY_URL
// the client of `tally serve`. Every verb of the seam calls it, the same
// way in both cases.

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	restclient "tally/client"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
	"tally/sessionname"
	"tally/store"
)

// cliService is what the CLI runs verbs on.
type cliService interface {
	service.Service
}

var (
	_ cliService = (*ledgerservice.Local)(nil)
	_ cliService = (*restclient.Client)(nil)
)

// service returns the process's Service, made on first use: nothing is
// opened until a verb calls it.
func (g *global) service() (cliService, error) {
	if g.svc != nil {
		return g.svc, nil
	}
	stale, err := g.stale()
	if err != nil {
		return nil, err
	}
	if u := g.remoteURL(); u != "" {
		c, err := restclient.New(restclient.Config{URL: u, Token: g.io.Getenv("TALLY_TOKEN"), Stale: stale})
		if err != nil {
			return nil, usageError{err}
		}
		if stale {
			g.warnOnce("stale reads (--consistency stale): answered from the node's replica as applied, which may miss writes acknowledged elsewhere")
		}
		g.rest, g.svc = c, c
		return c, nil
	}
	g.sessions = &cliSessions{g: g}
	cfg := ledgerservice.Config{Now: g.io.Now, Timekeeper: ledger.DefaultConfig().Timekeeper, Root: g.ledgerRoot}
	if lc, err := g.ledgerConfig(); err == nil {
		cfg.Timekeeper = lc.Timekeeper
	}
	g.svc = ledgerservice.New(g.sessions, cfg)
	return g.svc, nil
}

// stale reads --consistency.
func (g *global) stale() (bool, error) {
	switch g.consistency {
	case "", service.Linearizable:
		return false, nil
	case service.Stale:
		return true, nil
	}
	return false, usagef("consistency: must be linearizable or stale, not %q", g.consistency)
}

// target is the session --session names (default default/default).
func (g *global) target() (tenant, session string, err error) {
	tenant, session = sessionname.DefaultTenant, sessionname.DefaultSession
	if g.session != "" {
		t, s, ok := strings.Cut(g.session, "/")
		if !ok {
			return "", "", usagef("session: must be TENANT/SESSION")
		}
		tenant, session = t, s
	}
	return tenant, session, nil
}

// call is the Call of a verb acting as actor, with --request-id requestID,
// reading at now (zero: the service's clock).
func (g *global) call(actor, requestID string, now time.Time) (service.Call, error) {
	tenant, session, err := g.target()
	if err != nil {
		return service.Call{}, err
	}
	if err := restclient.CheckSession(tenant, session); err != nil {
		return service.Call{}, usageError{err}
	}
	if len(requestID) > service.RequestIDMax {
		return service.Call{}, usagef("request-id: at most %d bytes", service.RequestIDMax)
	}
	return service.Call{Tenant: tenant, Session: session, Actor: actor, RequestID: requestID, Now: now}, nil
}

// serviceCall is the Service and the Call (g.call) a verb runs with.
func (g *global) serviceCall(actor, requestID string, now time.Time) (cliService, service.Call, error) {
	svc, err := g.service()
	if err != nil {
		return nil, service.Call{}, err
	}
	call, err := g.call(actor, requestID, now)
	return svc, call, err
}

// requireActor returns the acting identity or a usage error naming how to
// set it: --as or TALLY_ACTOR, else fallback (the party a record names);
// over TALLY_URL the identity the server says the token acts as.
func (g *global) requireActor(fallback string) (string, error) {
	if g.remoteURL() != "" {
		id, err := g.whoamiAs(context.Background())
		if err != nil || id.Actor != "" {
			return id.Actor, err
		}
		// --insecure-dev and no identity given: the rule is the local one,
		// and the server acts as the party the record names.
	}
	if a := g.actor(); a != "" {
		return a, nil
	}
	if fallback != "" {
		return fallback, nil
	}
	return "", usagef("actor: required: pass --as WHO or set TALLY_ACTOR")
}

// optionalActor is the acting identity where a verb needs none: --as or
// TALLY_ACTOR, possibly none, and over TALLY_URL the token's identity.
func (g *global) optionalActor(ctx context.Context) (string, error) {
	if g.remoteURL() != "" {
		id, err := g.identity(ctx)
		return id.Actor, err
	}
	return g.actor(), nil
}

// warnOnce prints a warning on stderr, once per process: opening a
// session and exporting it both report the records it skips.
func (g *global) warnOnce(msg string) {
	if g.warned == nil {
		g.warned = map[string]bool{}
	}
	if !g.warned[msg] {
		g.warned[msg] = true
		fmt.Fprintln(g.io.Err, "warning: "+msg)
	}
}

// identity is who the CLI acts as over TALLY_URL, asked of the server
// once: --as or TALLY_ACTOR, when given with a token, must name the
// token's identity.
func (g *global) identity(ctx context.Context) (restclient.Identity, error) {
	id, err := g.whoamiAs(ctx)
	if err == nil && id.Actor == "" {
		return id, fmt.Errorf("server %s: whoami: no identity: pass --as WHO or set TALLY_ACTOR (a server run with --insecure-dev acts as the identity a request names)", g.remoteURL())
	}
	return id, err
}

// whoamiAs asks the server who the CLI acts as, once; under --insecure-dev
// without --as or TALLY_ACTOR the answer names no one.
func (g *global) whoamiAs(ctx context.Context) (restclient.Identity, error) {
	if g.whoami != nil {
		return *g.whoami, nil
	}
	if _, err := g.service(); err != nil {
		return restclient.Identity{}, err
	}
	c, err := g.call(g.actor(), "", time.Time{})
	if err != nil {
		return restclient.Identity{}, err
	}
	id, err := g.rest.Whoami(ctx, c)
	if err != nil {
		return restclient.Identity{}, err
	}
	if a := g.actor(); a != "" && a != id.Actor && g.io.Getenv("TALLY_TOKEN") != "" {
		return restclient.Identity{}, usagef("actor: %q is not the token's identity %q (over TALLY_URL you act as the token's identity)", a, id.Actor)
	}
	g.whoami = &id
	return id, nil
}

// cliSessions are the sessions of the one ledger directory a process
// works on, each opened once and held until the process ends.
type cliSessions struct {
	g *global
	// ledgers are opened once each: tally mcp runs tool calls
	// concurrently (so their appends share fsyncs).
	ledgers ledger.OpenOnce
}

// Open opens tenant/session of the ledger directory, warning once about
// records it skips. The CLI creates a session's log on its first write,
// as ledger.Open does, read or write alike.
func (s *cliSessions) Open(_ context.Context, tenant, session string, _ bool) (*ledger.Ledger, error) {
	return s.ledgers.Get(tenant+"/"+session, func() (*ledger.Ledger, error) {
		root, err := s.g.ledgerRoot()
		if err != nil {
			return nil, err
		}
		dir, err := store.SessionDir(root, tenant, session)
		if err != nil {
			return nil, usageError{err}
		}
		return s.g.openDir(dir)
	})
}

// close closes every session opened.
func (s *cliSessions) close() error { return s.ledgers.Close() }

// openDir opens the ledger of a session directory with the directory's
// settings and the CLI's clock, warning once about records it skips.
func (g *global) openDir(dir string) (*ledger.Ledger, error) {
	cfg, err := g.ledgerConfig()
	if err != nil {
		return nil, err
	}
	cfg.Now = g.io.Now
	cfg.Logger = slog.New(&warnHandler{w: g.io.Err})
	l, err := ledger.Open(dir, cfg)
	if err != nil {
		return nil, err
	}
	if w := l.SkippedSummary(); w != "" {
		g.warnOnce(w)
	}
	return l, nil
}
