package timekeeper

// Lapse delivery over A2A: the expectations draft's lapse task. Each lapse
// of an expectation raised with a replyTo goes back to the raising agent as
// a new message (so a new task on the agent's side) in the origin's context:
//
//	POST <replyTo.url>   (JSON-RPC 2.0; the body is a2a-go's types marshalled)
//	A2A-Version: 1.0
//	A2A-Extensions: <extension URI>
//	{"jsonrpc":"2.0","id":"…","method":"SendMessage","params":{"message":{
//	  "messageId":"lps_…",                 the lapse id: LapseID(expectation, lapse kind, due in force)
//	  "contextId":"<origin.contextId>",
//	  "referenceTaskIds":["<origin.taskId>"],
//	  "role":"ROLE_USER",
//	  "extensions":["<extension URI>"],
//	  "parts":[{"text":"expectation exp-… (kind) on TYPE:ID lapsed: overdue …"}],
//	  "metadata":{"<extension URI>":{the lapse notice: schema_version, kind, key, lapse, expectation}}}}}
//
// and, when the raise carried a push-notification config, the same message
// as an A2A push notification:
//
//	POST <replyTo.push.url>
//	A2A-Notification-Token: <replyTo.push.token>
//	{"message":{…the same message…}}
//
// A retried delivery is the same message with the same messageId, so the
// agent can tell it has it already. Promise notices and lapses of
// expectations raised without a replyTo are not this sink's: it accepts
// them without sending anything.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
	"tally/expect"
	"tally/instant"
)

// PushTokenHeader carries a push-notification config's token.
const PushTokenHeader = "A2A-Notification-Token"

// A2A sends lapses to the agents that raised the expectations, over A2A.
//
// Within one delivery: attempt n waits Backoff·2^(n-1), capped at
// BackoffMax, for at most Attempts attempts. A delivery that still fails is
// retried by the timekeeper on later sweeps (at-least-once, same messageId),
// but not before its sweep backoff has passed (SweepBackoff·2^(failures-1),
// capped at SweepBackoffMax): until then a sweep defers it without a
// request. After GiveUpSweeps failed sweeps, or once the lapse is older than
// GiveUpAge and has failed at least once, the sink gives up: the lapse is
// journaled as abandoned (JournalEntry.Outcome) and logged once, never tried
// again. With a Journal, the failure count and the next try are journaled
// after each failed sweep, so a restarted timekeeper goes on from them.
//
// The time spent in requests is budgeted: at most SweepBudget per sweep
// (told apart by the Journal's epoch; without a Journal, per BudgetWindow
// of wall time). Once it is spent, the sweep's other deliveries are
// deferred to a later sweep without a request, and a request in flight is
// cut off when the budget runs out (counted as the agent's failure only if
// it had at least half the budget). So no sweep spends more than
// SweepBudget on A2A, however many agents are dead.
//
// Targets are checked against Hosts (see HostPolicy): a refused target is
// journaled as undeliverable (Outcome) and logged, never retried.
type A2A struct {
	// ExtensionURI is the expectations extension a lapse is sent under when
	// the raise did not say which (replyTo.extension).
	ExtensionURI string
	// Client sends the requests; nil: a client that connects only where
	// Hosts allows, with a 10s timeout per request. A client given here
	// gets only the raise-time check of Hosts (names and literal addresses).
	Client     *http.Client
	Attempts   int // zero means 5
	Backoff    time.Duration
	BackoffMax time.Duration
	// Sleep waits between attempts (tests replace it); nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	// Hosts is the allow-list of lapse targets (see HostPolicy; empty: any
	// host that is not loopback, link-local or private). Read on first use.
	Hosts []string
	// GiveUpSweeps (zero: 10) and GiveUpAge (zero: 24h) bound how long an
	// unreachable agent is tried; SweepBackoff (zero: 30s) and
	// SweepBackoffMax (zero: 1h) space the sweeps that try it.
	GiveUpSweeps    int
	GiveUpAge       time.Duration
	SweepBackoff    time.Duration
	SweepBackoffMax time.Duration
	// SweepBudget (zero: 30s) is the request time allowed per sweep, or per
	// BudgetWindow (zero: 1 minute) when there is no Journal.
	SweepBudget  time.Duration
	BudgetWindow time.Duration
	// Now is the clock the sweep backoff and GiveUpAge are judged on (the
	// ledger's, which dates the lapses); nil: time.Now. The budget is of
	// wall time.
	Now func() time.Time
	// Journal, when set, is annotated with why a lapse was given up
	// (abandoned, undeliverable): the timekeeper's journal line for it says so.
	Journal *Journal
	// Logger logs each lapse given up, once; nil: slog.Default().
	Logger *slog.Logger

	mu      sync.Mutex
	cards   map[string]string // agent card URL → its JSON-RPC endpoint
	once    sync.Once
	policy  HostPolicy
	perr    error
	client_ *http.Client
	failing map[string]*failure // lapse id → its failed sweeps
	epoch   uint64              // the journal's epoch the budget was last reset at
	window  time.Time           // start of the current budget window (without a Journal)
	spent   time.Duration       // request time spent in it
}

// failure is a lapse whose delivery failed on one or more sweeps.
type failure struct {
	sweeps int
	next   time.Time // not tried again before
}

// Outcomes of a lapse the A2A sink gave up on, as journaled.
const (
	OutcomeAbandoned     = "abandoned"     // the agent stayed unreachable past the bounds
	OutcomeUndeliverable = "undeliverable" // the target is not allowed
)

// ErrDeferred is a delivery put off to a later sweep without a request:
// its sweep backoff has not passed, or the sweep budget is spent.
var ErrDeferred = errors.New("deferred")

func (s *A2A) defaults() (giveUpSweeps int, giveUpAge, backoff, backoffMax, budget, window time.Duration) {
	giveUpSweeps, giveUpAge = s.GiveUpSweeps, s.GiveUpAge
	backoff, backoffMax, budget, window = s.SweepBackoff, s.SweepBackoffMax, s.SweepBudget, s.BudgetWindow
	if giveUpSweeps <= 0 {
		giveUpSweeps = 10
	}
	if giveUpAge <= 0 {
		giveUpAge = 24 * time.Hour
	}
	if backoff <= 0 {
		backoff = 30 * time.Second
	}
	if backoffMax <= 0 {
		backoffMax = time.Hour
	}
	if budget <= 0 {
		budget = 30 * time.Second
	}
	if window <= 0 {
		window = time.Minute
	}
	return
}

func (s *A2A) init() {
	s.once.Do(func() {
		s.policy, s.perr = NewHostPolicy(s.Hosts)
		s.client_ = s.Client
		if s.client_ == nil {
			s.client_ = s.policy.Client(10 * time.Second)
		}
	})
}

func (s *A2A) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *A2A) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

func (s *A2A) Name() string { return "a2a" }

// Deliver accepts a bare document without sending it: this sink needs the
// notice (DeliverNotice).
func (s *A2A) Deliver(context.Context, string, []byte) error { return nil }

// DeliverNotice sends a lapse to its raising agent: SendMessage to the
// replyTo URL, and a push notification to the replyTo push URL, each when
// given. It returns nil once every one was acknowledged, or once it gave
// the lapse up (abandoned or undeliverable: see A2A).
func (s *A2A) DeliverNotice(ctx context.Context, n Notice) error {
	if n.Kind != KindLapse || n.Lapse == nil || n.ReplyTo == nil {
		return nil
	}
	s.init()
	if s.perr != nil {
		return s.perr
	}
	rt := n.ReplyTo
	for _, u := range []struct{ field, url string }{{"replyTo.url", rt.URL}, {"replyTo.push.url", rt.PushURL}} {
		if u.url == "" {
			continue
		}
		if err := s.policy.CheckURL(u.url); err != nil {
			return s.giveUp(n, OutcomeUndeliverable, fmt.Sprintf("%s %s: %v", u.field, u.url, err))
		}
	}
	giveUpSweeps, giveUpAge, backoff, backoffMax, budget, window := s.defaults()
	now := s.now()
	s.mu.Lock()
	f := s.failing[n.Key]
	if f == nil && s.Journal != nil {
		if r, ok := s.Journal.Retry(n.Key); ok { // failed sweeps before a restart
			f = &failure{sweeps: r.Sweeps, next: r.Next}
			if s.failing == nil {
				s.failing = map[string]*failure{}
			}
			s.failing[n.Key] = f
		}
	}
	if f != nil && now.Before(f.next) {
		s.mu.Unlock()
		return fmt.Errorf("%w: after %d failed sweeps, tried again from %s", ErrDeferred, f.sweeps, instant.Format(f.next))
	}
	if s.Journal != nil { // one budget per sweep: the timekeeper locks the journal once per sweep
		if e := s.Journal.Epoch(); e != s.epoch {
			s.epoch, s.spent = e, 0
		}
	} else if wall := time.Now(); s.window.IsZero() || wall.Sub(s.window) >= window {
		s.window, s.spent = wall, 0 // the budget is of wall time, not the ledger's
	}
	left := budget - s.spent
	s.mu.Unlock()
	if left <= 0 {
		return fmt.Errorf("%w: the sweep budget of %v is spent", ErrDeferred, budget)
	}
	// The clock starts before the deadline is set, so a request cut off by
	// it counts at least the whole of left as spent: started after, took
	// could fall short of left by the time between them, leaving a sliver of
	// budget that let one more request reach a dead agent.
	start := time.Now()
	rctx, cancel := context.WithTimeout(ctx, left)
	err := s.send(rctx, n)
	cancel()
	took := time.Since(start)
	s.mu.Lock()
	s.spent += took
	if err == nil {
		delete(s.failing, n.Key)
		s.mu.Unlock()
		return nil
	}
	if errors.Is(err, ErrHostNotAllowed) {
		delete(s.failing, n.Key)
		s.mu.Unlock()
		return s.giveUp(n, OutcomeUndeliverable, err.Error())
	}
	if ctx.Err() != nil { // the caller stopped: not the agent's failure
		s.mu.Unlock()
		return err
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) && left < budget/2 {
		// The budget ran out mid-request, and this delivery had only its
		// remains: not the agent's failure. (Given half the budget or more,
		// an agent that did not answer failed, so a hanging agent is backed
		// off and given up like any other.)
		s.mu.Unlock()
		return fmt.Errorf("%w: the sweep budget of %v ran out: %v", ErrDeferred, budget, err)
	}
	if f == nil {
		f = &failure{}
		if s.failing == nil {
			s.failing = map[string]*failure{}
		}
		s.failing[n.Key] = f
	}
	f.sweeps++
	age := now.Sub(n.Lapse.LapsedAt)
	if f.sweeps >= giveUpSweeps || age >= giveUpAge {
		delete(s.failing, n.Key)
		s.mu.Unlock()
		over, _ := instant.RoundSeconds(n.Lapse.LapsedAt, now) // exact where Sub saturates at 292 years
		return s.giveUp(n, OutcomeAbandoned, fmt.Sprintf("%d failed sweeps over %s; last: %v", f.sweeps, instant.FormatISOSpan(over, 0), err))
	}
	wait := backoff
	for i := 1; i < f.sweeps && wait < backoffMax; i++ {
		wait *= 2
	}
	f.next = now.Add(min(wait, backoffMax))
	retry := Retry{Sweeps: f.sweeps, Next: f.next}
	s.mu.Unlock()
	if s.Journal != nil {
		if jerr := s.Journal.RecordRetry(n.Key, n.Kind, n.Lapse.DueAt, retry); jerr != nil {
			s.logger().Warn("could not journal a failed delivery; a restart counts its sweeps again", "key", n.Key, "err", jerr)
		}
	}
	return err
}

// send makes one delivery: SendMessage, then the push, each when given.
func (s *A2A) send(ctx context.Context, n Notice) error {
	rt := n.ReplyTo
	msg := lapseMessage(n, s.uri(rt))
	if rt.URL != "" {
		if err := s.sendMessage(ctx, rt, msg); err != nil {
			return err
		}
	}
	if rt.PushURL != "" {
		if err := s.push(ctx, rt, msg); err != nil {
			return err
		}
	}
	return nil
}

// giveUp ends a lapse's delivery: logged once, annotated in the journal
// (the timekeeper journals it on the nil returned, so it is never retried).
func (s *A2A) giveUp(n Notice, outcome, reason string) error {
	if len(reason) > 1024 {
		reason = reason[:1024] + "…"
	}
	s.logger().Warn("lapse delivery over A2A given up", "key", n.Key, "outcome", outcome, "reason", reason)
	if s.Journal != nil {
		s.Journal.Annotate(n.Key, outcome, reason)
	}
	return nil
}

func (s *A2A) uri(rt *expect.ReplyTo) string {
	if rt.Extension != "" {
		return rt.Extension
	}
	if s.ExtensionURI != "" {
		return s.ExtensionURI
	}
	return a2atask.ExpectURI
}

// lapseMessage is the A2A message a lapse is delivered as (see the comment
// at the top of this file; the mapping is a2atask's).
func lapseMessage(n Notice, uri string) *a2a.Message {
	var e *a2atask.LapsedExpectation
	if b := n.Expectation; b != nil {
		e = &a2atask.LapsedExpectation{Kind: b.Kind, Subject: b.Subject, Origin: b.Origin}
	}
	return a2atask.LapseMessage(n.Lapse, e, n.Doc, uri)
}

func (s *A2A) client() *http.Client {
	s.init()
	return s.client_
}

// poster is how this sink POSTs: on its client, with its attempts and
// backoff; a host the policy refuses is not tried again.
func (s *A2A) poster() poster {
	return poster{client: s.client(), attempts: s.Attempts, backoff: s.Backoff, ceiling: s.BackoffMax, sleep: s.Sleep,
		final: func(err error) bool { return errors.Is(err, ErrHostNotAllowed) }}
}

// a2aHeader is what every request of a delivery under the extension uri
// carries.
func a2aHeader(uri string) http.Header {
	h := http.Header{}
	h.Set(a2a.SvcParamVersion, string(a2a.Version))
	h.Set(a2a.SvcParamExtensions, uri)
	return h
}

// sendMessage POSTs a JSON-RPC SendMessage of msg to the agent's endpoint
// (its card's JSON-RPC interface when the URL is a card's), retried. The
// JSON-RPC id is the message id, so a retried request is byte for byte the
// same. (a2a-go's client transport would pull in a module this one does
// not otherwise need.)
func (s *A2A) sendMessage(ctx context.Context, rt *expect.ReplyTo, msg *a2a.Message) error {
	body, err := json.Marshal(struct {
		JSONRPC string                  `json:"jsonrpc"`
		ID      string                  `json:"id"`
		Method  string                  `json:"method"`
		Params  *a2a.SendMessageRequest `json:"params"`
	}{"2.0", msg.ID, "SendMessage", &a2a.SendMessageRequest{Message: msg}})
	if err != nil {
		return err
	}
	p := s.poster()
	return p.retry(ctx, "a2a SendMessage "+rt.URL, func() error {
		endpoint, err := s.endpoint(ctx, rt.URL)
		if err != nil {
			return err
		}
		return p.once(ctx, endpoint, a2aHeader(msg.Extensions[0]), body, rpcAnswer)
	})
}

// rpcAnswer accepts a JSON-RPC answer with a result; an error object, or
// anything else, is the agent's failure.
func rpcAnswer(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		drain(resp)
		return fmt.Errorf("answered %s", resp.Status)
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&answer); err != nil {
		return fmt.Errorf("answer is not JSON-RPC: %w", err)
	}
	if answer.Error != nil {
		return fmt.Errorf("refused: %d %s", answer.Error.Code, answer.Error.Message)
	}
	if len(answer.Result) == 0 {
		return fmt.Errorf("answer has neither result nor error")
	}
	return nil
}

// isCardURL reports whether u names an agent card rather than an endpoint.
func isCardURL(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	return strings.HasSuffix(p.Path, "/agent-card.json") || strings.HasSuffix(p.Path, "/agent.json")
}

// endpoint resolves an agent card URL to the card's JSON-RPC interface
// (cached); any other URL is the endpoint itself.
func (s *A2A) endpoint(ctx context.Context, u string) (string, error) {
	if !isCardURL(u) {
		return u, nil
	}
	s.mu.Lock()
	ep, ok := s.cards[u]
	s.mu.Unlock()
	if ok {
		return ep, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return "", fmt.Errorf("agent card %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("agent card %s: answered %s", u, resp.Status)
	}
	var card a2a.AgentCard
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&card); err != nil {
		return "", fmt.Errorf("agent card %s: %w", u, err)
	}
	for _, in := range card.SupportedInterfaces {
		if in != nil && in.ProtocolBinding == a2a.TransportProtocolJSONRPC && in.URL != "" {
			ep = in.URL
			break
		}
	}
	if ep == "" {
		return "", fmt.Errorf("agent card %s offers no JSON-RPC interface", u)
	}
	s.mu.Lock()
	if s.cards == nil {
		s.cards = map[string]string{}
	}
	s.cards[u] = ep
	s.mu.Unlock()
	return ep, nil
}

// push POSTs msg in A2A's push-notification shape ({"message":{…}}) to the
// push URL with the config's token and its authentication, if any
// ("Authorization: scheme credentials"), retried.
func (s *A2A) push(ctx context.Context, rt *expect.ReplyTo, msg *a2a.Message) error {
	body, err := json.Marshal(a2a.StreamResponse{Event: msg})
	if err != nil {
		return err
	}
	hdr := a2aHeader(msg.Extensions[0])
	if rt.PushToken != "" {
		hdr.Set(PushTokenHeader, rt.PushToken)
	}
	if rt.PushAuthScheme != "" {
		hdr.Set("Authorization", strings.TrimSpace(rt.PushAuthScheme+" "+rt.PushAuthCredentials))
	}
	return s.poster().post(ctx, "a2a push "+rt.PushURL, rt.PushURL, hdr, body, nil)
}
