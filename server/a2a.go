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
	"tally/ledger"
	"tally/rule"
	"tally/store"
	"tally/vocab"
	"tally/watch"
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
	// NoLapseDelivery stops the built-in watcher from sending lapses to the
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
	if _, err := watch.NewHostPolicy(c.LapseHosts); err != nil {
		return fmt.Errorf("--a2a-lapse-hosts: %w", err)
	}
	_, _, err := c.defaultSession()
	return err
}

// defaultSession is DefaultSession's tenant and session.
func (c A2AConfig) defaultSession() (tenant, session string, err error) {
	if c.DefaultSession == "" {
		return store.DefaultTenant, store.DefaultSession, nil
	}
	tenant, session, ok := strings.Cut(c.DefaultSession, "/")
	if !ok {
		return "", "", fmt.Errorf("--a2a-default-session %q: must be TENANT/SESSION", c.DefaultSession)
	}
	if err := store.CheckName("tenant", tenant); err != nil {
		return "", "", fmt.Errorf("--a2a-default-session %q: %w", c.DefaultSession, err)
	}
	if err := store.CheckName("session", session); err != nil {
		return "", "", fmt.Errorf("--a2a-default-session %q: %w", c.DefaultSession, err)
	}
	return tenant, session, nil
}

// lapseSink is the sink that delivers one session's lapses over A2A, on
// the session's clock, annotating its watcher's journal (set by the caller
// once the watcher exists).
func (s *Server) lapseSink(l *ledger.Ledger) *watch.A2A {
	a := s.cfg.A2A.withDefaults()
	return &watch.A2A{
		ExtensionURI: a.ExpectURI, Attempts: a.LapseAttempts, Backoff: a.LapseBackoff,
		Hosts: a.LapseHosts, GiveUpSweeps: a.LapseGiveUpSweeps, GiveUpAge: a.LapseGiveUpAge,
		SweepBackoff: a.LapseSweepBackoff, SweepBudget: a.LapseSweepBudget,
		Now: l.Now, Logger: s.cfg.Logger,
	}
}

// checkReplyTo refuses, at raise time, a replyTo whose host the allow-list
// refuses (names are judged again, on what they resolve to, at delivery).
func (s *Server) checkReplyTo(field string, rt *expect.ReplyTo) error {
	if rt == nil {
		return nil
	}
	p, err := watch.NewHostPolicy(s.cfg.A2A.LapseHosts)
	if err != nil {
		return err
	}
	for _, u := range []struct{ field, url string }{{field + ".url", rt.URL}, {field + ".push.url", rt.PushURL}} {
		if u.url == "" {
			continue
		}
		if err := p.CheckURL(u.url); err != nil {
			return rule.Invalidf(u.field, err.Error())
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
			tenant, session = store.DefaultTenant, store.DefaultSession // refused by Validate before serving
		}
	}
	sess := base + "/v1/tenants/" + tenant + "/sessions/" + session
	events := sess + "/events"
	ext := func(uri string, f a2atask.Family, desc string, aliases []string, extra map[string]any) a2a.AgentExtension {
		params := map[string]any{
			"family":      string(f),
			"keepsTime":   true,
			"metadataKey": a2atask.RecordKey(uri, f),
			"events":      events,
		}
		if len(aliases) > 0 {
			params["aliases"] = aliases
		}
		for k, v := range extra {
			params[k] = v
		}
		return a2a.AgentExtension{URI: uri, Description: desc, Required: false, Params: params}
	}
	jsonrpc := a2a.NewAgentInterface(sess+"/a2a", a2a.TransportProtocolJSONRPC)
	rest := a2a.NewAgentInterface(sess+"/a2a/rest", a2a.TransportProtocolHTTPJSON)
	desc := "tally: a durable, hash-chained ledger of obligations between agents. " +
		"Activate a family's extension in the A2A-Extensions header and carry its record in message metadata under the extension URI."
	if root {
		desc += " This card is the agent of session " + tenant + "/" + session + ". Every tally session is an agent of its own: " +
			base + "/v1/tenants/{tenant}/sessions/{session}/a2a, with its card at …/a2a/.well-known/agent-card.json."
	}
	return &a2a.AgentCard{
		Name:                "tally",
		Description:         desc,
		Version:             "1",
		SupportedInterfaces: []*a2a.AgentInterface{jsonrpc, rest},
		Capabilities: a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{
			ext(c.PromiseURI, a2atask.FamilyPromise, "Promises: declare, amend, resolve (satisfied, cancelled, released) and assess. Tasks map satisfied → COMPLETED, cancelled → REJECTED, released → CANCELED; overdue and violated stay in the record.",
				[]string{vocab.PinkiPromiseURI}, map[string]any{
					"actions":       a2atask.PromiseActions().Names(),
					"assessmentsAt": events,
				}),
			ext(c.ClaimURI, a2atask.FamilyClaim, "Claims of work with acceptance requirements (proof of work): create, post, cancel, revoke, supersede, take or adopt the receipt, progress, close/post/receive testaments, begin/report checks, publish and receive artifacts. "+
				"The record's \"action\" picks the verb (default create); its other members are the HTTP JSON API's body for that verb, \"claim\" defaulting to the message's taskId. The caller's token is the acting identity: the creator is the claimant. "+
				"artifact.publish takes the bytes as the message's one file part with raw bytes, and so may check.report its evidence (published in the verdict's own write); reading bytes back is the HTTP JSON API's (GET …/claims/{claim}/artifacts/{artifact}). "+
				"A claim is a task with the claim's id: Generated, Posted → SUBMITTED; Received … Validating → WORKING; Satisfied → COMPLETED with each slot's witness and the received testament as artifacts; "+
				"ReceiptFailed or a refused response → REJECTED; Cancelled, Revoked, Superseded → CANCELED; PostFailed, TestamentGenerationFailed, Validation{Incomplete,Failed,Errored}, Expired, DependencyFailed, Deadlocked → FAILED with the reason; overdue stays in the record. CancelTask cancels as the claimant.",
				nil, map[string]any{
					"actions":      a2atask.ClaimActions().Names(),
					"artifactURLs": sess + "/claims/{claim}/artifacts/{artifact}",
				}),
			ext(c.ExpectURI, a2atask.FamilyExpect, "Expectations, facts and lapses; the server's watcher keeps time. Raise with the draft's expectation document (origin: the message's task and context; replyTo: where lapses go), record facts, withdraw, or report an origin task's outcome. Each lapse goes back to the raising agent as a new message in the origin context, referencing the origin task, its messageId the lapse id. CancelTask on an origin task withdraws its expectations.",
				[]string{vocab.ExpectationsDraftURI}, map[string]any{
					"actions":       a2atask.ExpectActions().Names(),
					"lapseDelivery": !c.NoLapseDelivery,
				}),
		}},
		DefaultInputModes:  []string{"application/json", "text/plain"},
		DefaultOutputModes: []string{"application/json", "text/plain"},
		Skills: []a2a.AgentSkill{{
			ID: "promise", Name: "Promise ledger", Tags: []string{"promise", "obligation", "ledger"},
			Description: "Record a promise between agents and track it to satisfaction, cancellation or release.",
		}, {
			ID: "claim", Name: "Proof-of-work ledger", Tags: []string{"claim", "proof-of-work", "acceptance", "ledger"},
			Description: "Issue a claim of work with required outputs and checks; the ledger derives acceptance from receipts, testaments and verdicts bound to exact artifacts.",
		}},
		SecuritySchemes:      a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer", Description: "a tally token: its participant is the caller's identity"}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"bearer": a2a.SecuritySchemeScopes{}}},
	}
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
