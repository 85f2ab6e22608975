package watch

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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/expect"
)

// PushTokenHeader carries a push-notification config's token.
const PushTokenHeader = "A2A-Notification-Token"

// A2A sends lapses to the agents that raised the expectations, over A2A.
// Retries: attempt n waits Backoff·2^(n-1), capped at BackoffMax, for at
// most Attempts attempts per delivery; a delivery that still fails is
// retried by the watcher on a later sweep (at-least-once, same messageId).
type A2A struct {
	// ExtensionURI is the expectations extension a lapse is sent under when
	// the raise did not say which (replyTo.extension).
	ExtensionURI string
	Client       *http.Client // nil: a client with a 10s timeout
	Attempts     int          // zero means 5
	Backoff      time.Duration
	BackoffMax   time.Duration
	// Sleep waits between attempts (tests replace it); nil sleeps on a timer.
	Sleep func(ctx context.Context, d time.Duration) error

	mu    sync.Mutex
	cards map[string]string // agent card URL → its JSON-RPC endpoint
}

func (s *A2A) Name() string { return "a2a" }

// Deliver accepts a bare document without sending it: this sink needs the
// notice (DeliverNotice).
func (s *A2A) Deliver(context.Context, string, []byte) error { return nil }

// DeliverNotice sends a lapse to its raising agent: SendMessage to the
// replyTo URL, and a push notification to the replyTo push URL, each when
// given. It returns nil once every one was acknowledged.
func (s *A2A) DeliverNotice(ctx context.Context, n Notice) error {
	if n.Kind != KindLapse || n.Lapse == nil || n.ReplyTo == nil {
		return nil
	}
	rt := n.ReplyTo
	msg := LapseMessage(n, s.uri(rt))
	if rt.URL != "" {
		if err := s.retry(ctx, "SendMessage "+rt.URL, func() error { return s.sendMessage(ctx, rt, msg) }); err != nil {
			return err
		}
	}
	if rt.PushURL != "" {
		if err := s.retry(ctx, "push "+rt.PushURL, func() error { return s.push(ctx, rt, msg) }); err != nil {
			return err
		}
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
	return "urn:tally:ext:expect"
}

// LapseMessage is the A2A message a lapse is delivered as (see the package
// comment of this file): messageId the lapse id, the origin's contextId,
// referenceTaskIds the origin task, the notice document in metadata[uri].
func LapseMessage(n Notice, uri string) *a2a.Message {
	lv := n.Lapse
	text := fmt.Sprintf("expectation %s lapsed: %s (due %s, lapsed at %s)",
		lv.ExpectationID, lv.Lapse, expect.FormatTime(lv.DueAt), expect.FormatTime(lv.LapsedAt))
	msg := &a2a.Message{
		ID:         lv.LapseID,
		Role:       a2a.MessageRoleUser,
		Extensions: []string{uri},
		Metadata:   map[string]any{uri: json.RawMessage(n.Doc)},
	}
	if e := n.Expectation; e != nil {
		text = fmt.Sprintf("expectation %s (%s on %s) lapsed: %s (due %s, lapsed at %s)",
			lv.ExpectationID, e.Kind, e.Subject, lv.Lapse, expect.FormatTime(lv.DueAt), expect.FormatTime(lv.LapsedAt))
		if o := e.Origin; o != nil {
			msg.ContextID = o.ContextID
			if o.TaskID != "" {
				msg.ReferenceTasks = []a2a.TaskID{a2a.TaskID(o.TaskID)}
			}
		}
	}
	msg.Parts = a2a.ContentParts{a2a.NewTextPart(text)}
	return msg
}

func (s *A2A) client() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return &http.Client{Timeout: 10 * time.Second}
}

func (s *A2A) retry(ctx context.Context, what string, try func() error) error {
	attempts := s.Attempts
	if attempts <= 0 {
		attempts = 5
	}
	backoff, ceiling := s.Backoff, s.BackoffMax
	if backoff <= 0 {
		backoff = 500 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 30 * time.Second
	}
	sleep := s.Sleep
	if sleep == nil {
		sleep = sleepContext
	}
	var last error
	for n := 1; n <= attempts; n++ {
		if n > 1 {
			if err := sleep(ctx, backoff); err != nil {
				return fmt.Errorf("a2a %s: %w (last: %v)", what, err, last)
			}
			backoff = min(backoff*2, ceiling)
		}
		if last = try(); last == nil {
			return nil
		}
	}
	return fmt.Errorf("a2a %s: %d attempts: %w", what, attempts, last)
}

// sendMessage POSTs a JSON-RPC SendMessage of msg to the agent's endpoint
// (its card's JSON-RPC interface when the URL is a card's). The JSON-RPC id
// is the message id, so a retried request is byte for byte the same. (a2a-go's
// client transport would pull in a module this one does not otherwise need.)
func (s *A2A) sendMessage(ctx context.Context, rt *expect.ReplyTo, msg *a2a.Message) error {
	endpoint, err := s.endpoint(ctx, rt.URL)
	if err != nil {
		return err
	}
	body, err := json.Marshal(struct {
		JSONRPC string                  `json:"jsonrpc"`
		ID      string                  `json:"id"`
		Method  string                  `json:"method"`
		Params  *a2a.SendMessageRequest `json:"params"`
	}{"2.0", msg.ID, "SendMessage", &a2a.SendMessageRequest{Message: msg}})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(a2a.SvcParamVersion, string(a2a.Version))
	req.Header.Set(a2a.SvcParamExtensions, msg.Extensions[0])
	resp, err := s.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
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
// push URL with the config's token.
func (s *A2A) push(ctx context.Context, rt *expect.ReplyTo, msg *a2a.Message) error {
	body, err := json.Marshal(a2a.StreamResponse{Event: msg})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rt.PushURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(a2a.SvcParamVersion, string(a2a.Version))
	req.Header.Set(a2a.SvcParamExtensions, msg.Extensions[0])
	if rt.PushToken != "" {
		req.Header.Set(PushTokenHeader, rt.PushToken)
	}
	resp, err := s.client().Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}
