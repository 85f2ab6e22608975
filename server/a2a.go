package server

// The A2A v1.0 binding: tally's families as A2A extensions.
//
// Endpoints (one A2A agent per tally session; the tenant and session are in
// the path, exactly as for the HTTP JSON API, and the caller's identity is
// the bearer token's participant):
//
//	GET  /.well-known/agent-card.json                               the server's card: the default session's (A2AConfig.DefaultSession)
//	GET  /v1/tenants/{t}/sessions/{s}/a2a/.well-known/agent-card.json  the session's card
//	GET  /v1/tenants/{t}/sessions/{s}/.well-known/agent-card.json      the same (a client resolving the card against …/a2a without a trailing slash)
//	POST /v1/tenants/{t}/sessions/{s}/a2a                           JSON-RPC 2.0 (SendMessage, GetTask, ListTasks, CancelTask)
//	POST /v1/tenants/{t}/sessions/{s}/a2a/rest/message:send         HTTP+JSON
//	GET  /v1/tenants/{t}/sessions/{s}/a2a/rest/tasks[/{id}]         HTTP+JSON
//	POST /v1/tenants/{t}/sessions/{s}/a2a/rest/tasks/{id}:cancel    HTTP+JSON
//
// Every task of a session has contextId "{t}/{s}": one A2A context per
// tally session. A client's own contextId on a message is accepted and not
// kept. A promise's task id is its task field when set, else its id; a
// claim's is its id. GetTask and CancelTask look an id up as a promise's
// task, then a claim, then the origin task of expectations.
//
// The HTTP+JSON transport is a2a-go's (NewRESTHandler), the JSON-RPC
// envelope tally's own (a2a_jsonrpc.go); both run behind the same
// middleware (a2a_middleware.go). The request handler behind them is
// tally's own (a2aHandler), not a2a-go's executor: the executor model mints task ids and keeps tasks in its own
// store, whereas here a task is a view of a ledger record and its id is the
// record's.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/zeebo/blake3"

	"tally/a2atask"
	"tally/expect"
	"tally/refuse"
	"tally/sessionname"
	"tally/timekeeper"
)

// A2AConfig tunes the A2A binding. Empty fields take the defaults.
type A2AConfig struct {
	// Extension URIs of tally's own families (defaults urn:tally:ext:promise,
	// urn:tally:ext:claim, urn:tally:ext:expect).
	PromiseURI, ClaimURI, ExpectURI string
	// PublicURL is the base URL the card advertises (scheme://host[:port]);
	// empty: taken from each card request's Host.
	PublicURL string
	// DefaultSession ("TENANT/SESSION", default "default/default") is the
	// session whose agent the server's own card (/.well-known/agent-card.json)
	// describes, so that a client given only the server's URL calls real
	// URLs; every other session has its own card.
	DefaultSession string
	// CardMaxAge is the card's Cache-Control max-age (default 5 minutes).
	CardMaxAge time.Duration
	// NoLapseDelivery stops the built-in timekeeper from sending lapses to the
	// agents that raised the expectations over A2A. Delivery is on by
	// default and concerns only expectations raised with a replyTo.
	NoLapseDelivery bool
	// LapseAttempts and LapseBackoff tune that delivery's retries within
	// one sweep (defaults 5 and 500ms, doubling up to 30s); a delivery that
	// still fails is tried again on the next sweep.
	LapseAttempts int
	LapseBackoff  time.Duration
	// LapseHosts is the allow-list of lapse targets (replyTo URLs): hosts,
	// host:port, or *.domain. Empty (the default): any host except
	// loopback, link-local and private-range addresses, judged on the
	// addresses a name resolves to when the lapse is delivered. A target
	// refused is refused at raise time when its host can be judged then
	// ("replyTo.url: host not allowed"), else journaled as undeliverable at
	// delivery. Agents on 127.0.0.1 must be listed.
	LapseHosts []string
	// An agent that stays unreachable is given up (journaled abandoned,
	// logged once) after LapseGiveUpSweeps failed sweeps (default 10) or
	// once its lapse is LapseGiveUpAge old (default 24h); the sweeps that
	// retry it are spaced from LapseSweepBackoff (default 30s), doubling up
	// to an hour. A sweep spends at most LapseSweepBudget (default 30s) in
	// A2A requests, the rest waiting for a later sweep.
	LapseGiveUpSweeps int
	LapseGiveUpAge    time.Duration
	LapseSweepBackoff time.Duration
	LapseSweepBudget  time.Duration
}

// Validate reports an A2A configuration that cannot work (an allow-list
// entry that is not a host pattern), quoting the value.
func (c A2AConfig) Validate() error {
	if _, err := timekeeper.NewHostPolicy(c.LapseHosts); err != nil {
		return fmt.Errorf("--a2a-lapse-hosts: %w", err)
	}
	_, _, err := c.defaultSession()
	return err
}

// defaultSession is DefaultSession's tenant and session.
func (c A2AConfig) defaultSession() (tenant, session string, err error) {
	if c.DefaultSession == "" {
		return sessionname.DefaultTenant, sessionname.DefaultSession, nil
	}
	tenant, session, ok := strings.Cut(c.DefaultSession, "/")
	if !ok {
		return "", "", fmt.Errorf("--a2a-default-session %q: must be TENANT/SESSION", c.DefaultSession)
	}
	if err := sessionname.Check("tenant", tenant); err != nil {
		return "", "", fmt.Errorf("--a2a-default-session %q: %w", c.DefaultSession, err)
	}
	if err := sessionname.Check("session", session); err != nil {
		return "", "", fmt.Errorf("--a2a-default-session %q: %w", c.DefaultSession, err)
	}
	return tenant, session, nil
}

// lapseSink is the sink that delivers one session's lapses over A2A, on
// the session's clock, annotating its timekeeper's journal (set by the caller
// once the timekeeper exists).
func (s *Server) lapseSink(now func() time.Time) *timekeeper.A2A {
	a := s.cfg.A2A.withDefaults()
	return &timekeeper.A2A{
		ExtensionURI: a.ExpectURI, Attempts: a.LapseAttempts, Backoff: a.LapseBackoff,
		Hosts: a.LapseHosts, GiveUpSweeps: a.LapseGiveUpSweeps, GiveUpAge: a.LapseGiveUpAge,
		SweepBackoff: a.LapseSweepBackoff, SweepBudget: a.LapseSweepBudget,
		Now: now, Logger: s.cfg.Logger,
	}
}

// checkReplyTo refuses, at raise time, a replyTo whose host the allow-list
// refuses (names are judged again, on what they resolve to, at delivery).
func (s *Server) checkReplyTo(field string, rt *expect.ReplyTo) error {
	if rt == nil {
		return nil
	}
	p, err := timekeeper.NewHostPolicy(s.cfg.A2A.LapseHosts)
	if err != nil {
		return err
	}
	for _, u := range []struct{ field, url string }{{field + ".url", rt.URL}, {field + ".push.url", rt.PushURL}} {
		if u.url == "" {
			continue
		}
		if err := p.CheckURL(u.url); err != nil {
			return refuse.Invalidf(u.field, err.Error())
		}
	}
	return nil
}

func (c A2AConfig) withDefaults() A2AConfig {
	u := c.uris()
	c.PromiseURI, c.ClaimURI, c.ExpectURI = u.Promise, u.Claim, u.Expect
	if c.CardMaxAge <= 0 {
		c.CardMaxAge = 5 * time.Minute
	}
	return c
}

// uris are the extension URIs this configuration names, defaults filled.
func (c A2AConfig) uris() a2atask.URIs {
	return a2atask.URIs{Promise: c.PromiseURI, Claim: c.ClaimURI, Expect: c.ExpectURI}.WithDefaults()
}

// a2aREST returns the HTTP+JSON endpoints' handler: a2a-go's REST handler
// under the session's …/a2a/rest prefix, behind the A2A middleware (a
// CancelTask's body read for its metadata, which a2a-go does not pass on).
func (s *Server) a2aREST() func(http.ResponseWriter, *http.Request) {
	h := a2asrv.NewRESTHandler(s.a2aRequestHandler())
	other := s.a2aAuthenticated(s.a2aJSONBody(s.writeError, false, h))
	cancel := s.a2aAuthenticated(s.a2aJSONBody(s.writeError, true, s.a2aCancelMetadata(h)))
	return func(w http.ResponseWriter, r *http.Request) {
		esc := r.URL.EscapedPath()
		i := strings.Index(esc, "/a2a/rest/")
		if i < 0 {
			http.NotFound(w, r)
			return
		}
		rest := esc[i+len("/a2a/rest"):]
		unesc, err := url.PathUnescape(rest)
		if err != nil {
			s.writeError(w, badRequest{"path: " + err.Error()})
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = unesc, rest
		if r2.Method == http.MethodPost && strings.HasSuffix(r2.URL.Path, ":cancel") {
			cancel.ServeHTTP(w, r2)
			return
		}
		other.ServeHTTP(w, r2)
	}
}

func (s *Server) a2aRequestHandler() a2asrv.RequestHandler {
	return &a2asrv.InterceptedHandler{Handler: &a2aHandler{s: s}, Logger: s.cfg.Logger}
}

// baseURL is the URL the card advertises.
func (s *Server) baseURL(r *http.Request) string {
	if u := s.cfg.A2A.PublicURL; u != "" {
		return strings.TrimRight(u, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// AgentCard is the card of one session, or the server's card (the default
// session's) when tenant is "". Without tokens (Config.Insecure) it
// declares no security scheme, and says how identities are named instead.
func (s *Server) AgentCard(base, tenant, session string) *a2a.AgentCard {
	card := s.cfg.A2A.AgentCard(base, tenant, session)
	if s.cfg.Insecure {
		card.SecuritySchemes, card.SecurityRequirements = nil, nil
		card.Description += " This server runs with --insecure-dev and takes no token: reads need no identity; a write acts as the X-Tally-Actor header names, " +
			"or without it as its record's own party (" + devPartiesText + ")."
	}
	return card
}

// AgentCard is the card a server with this A2A configuration serves at
// base (see Server.AgentCard): what `tally a2a card` prints offline.
func (cfg A2AConfig) AgentCard(base, tenant, session string) *a2a.AgentCard {
	c := cfg.withDefaults()
	root := tenant == ""
	if root {
		var err error
		if tenant, session, err = c.defaultSession(); err != nil {
			tenant, session = sessionname.DefaultTenant, sessionname.DefaultSession // refused by Validate before serving
		}
	}
	return a2atask.Card{URIs: c.uris(), Base: base, Tenant: tenant, Session: session, Root: root, LapseDelivery: !c.NoLapseDelivery}.AgentCard()
}

// a2aCard serves the server's card, a2aSessionCard a session's. Both are
// public (a card says how to call, not what the ledger holds), carry an
// ETag and answer If-None-Match with 304.
func (s *Server) a2aCard(w http.ResponseWriter, r *http.Request) {
	s.writeCard(w, r, s.AgentCard(s.baseURL(r), "", ""))
}

func (s *Server) a2aSessionCard(w http.ResponseWriter, r *http.Request) {
	s.writeCard(w, r, s.AgentCard(s.baseURL(r), r.PathValue("tenant"), r.PathValue("session")))
}

// cardDocument is a card as served: the capabilities tally does not offer
// are declared false rather than left out (a2a-go omits a false one), so a
// client that reads capabilities.pushNotifications finds the answer. Task
// push-notification configs are not kept (the four methods answer -32003);
// lapse deliveries take their push config from the raise instead.
type cardDocument struct {
	*a2a.AgentCard
	Capabilities cardCapabilities `json:"capabilities"`
}

type cardCapabilities struct {
	a2a.AgentCapabilities
	PushNotifications bool `json:"pushNotifications"`
	Streaming         bool `json:"streaming"`
}

func (s *Server) writeCard(w http.ResponseWriter, r *http.Request, card *a2a.AgentCard) {
	b, err := json.Marshal(cardDocument{AgentCard: card, Capabilities: cardCapabilities{AgentCapabilities: card.Capabilities,
		PushNotifications: card.Capabilities.PushNotifications, Streaming: card.Capabilities.Streaming}})
	if err != nil {
		s.writeError(w, err)
		return
	}
	sum := blake3.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(int(s.cfg.A2A.withDefaults().CardMaxAge/time.Second)))
	h.Set("Access-Control-Allow-Origin", "*")
	if inm := r.Header.Get("If-None-Match"); inm != "" {
		for _, t := range strings.Split(inm, ",") {
			if t = strings.TrimSpace(t); t == etag || t == "W/"+etag || t == "*" {
				w.WriteHeader(http.StatusNotModified)
				return
			}
		}
	}
	writeDoc(w, http.StatusOK, append(b, '\n'))
}
