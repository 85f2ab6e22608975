// Package client is the Service over a tally server's REST API: each
// method sends the api document to its route and reads the response
// document back, so a caller prints what it would print on a local ledger.
// A refusal the server answers with comes back as a *rest.Refusal
// holding the server's error document as is.
//
// The Call of a method names the session (the URL path), the acting
// identity (sent as X-Tally-Actor, which only a server run with
// --insecure-dev reads; otherwise the bearer token's identity acts), the
// person role (sent as X-Tally-Role without a token) and the request id
// (Idempotency-Key).
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"tally/api"
	"tally/auth"
	"tally/instant"
	"tally/rest"
	"tally/service"
	"tally/sessionname"
	"tally/verb"
)

// Config is where the server is and how to reach it.
type Config struct {
	// URL is the server's base URL (TALLY_URL), without a trailing slash.
	URL string
	// Token is the bearer token (TALLY_TOKEN); "" against a server run
	// with --insecure-dev.
	Token string
	// HTTP is the HTTP client; nil means one of the client's own.
	HTTP *http.Client
	// Timeout bounds one request, its body and its retries included; 0
	// means 60s.
	Timeout time.Duration
	// Stale asks for every read at consistency=stale, as a Call's Stale
	// asks for its own.
	Stale bool
	// Retry bounds the sends of one request after retryable answers
	// (Send); its zero value takes the defaults.
	Retry Retry
}

// Client talks to one tally server.
type Client struct {
	url     string
	token   string
	http    *http.Client
	timeout time.Duration
	stale   bool
	retry   Retry
	// heard: an answer of the server came back; replicated: one said the
	// server is a cluster node (api.ReplicatedHeader).
	heard, replicated atomic.Bool
}

// New returns the client of cfg.URL, which must be a URL.
func New(cfg Config) (*Client, error) {
	u := strings.TrimRight(strings.TrimSpace(cfg.URL), "/")
	if _, err := url.ParseRequestURI(u); err != nil {
		return nil, fmt.Errorf("TALLY_URL: %q is not a URL", u)
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	return &Client{url: u, token: cfg.Token, http: cfg.HTTP, timeout: cfg.Timeout, stale: cfg.Stale, retry: cfg.Retry.WithDefaults()}, nil
}

// URL is the server's base URL.
func (c *Client) URL() string { return c.url }

// SessionURL is the URL of a path under the session tenant/session, each
// segment escaped, with the query q.
func (c *Client) SessionURL(tenant, session string, q url.Values, segs ...string) string {
	var b strings.Builder
	b.WriteString(c.url + "/v1/tenants/" + url.PathEscape(tenant) + "/sessions/" + url.PathEscape(session))
	for _, s := range segs {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	if len(q) > 0 {
		b.WriteByte('?')
		b.WriteString(q.Encode())
	}
	return b.String()
}

// Send sends one request as call and returns a 2xx response whose body the
// caller reads, within the request's time bound, and then calls done; any
// other answer is the server's refusal as a *rest.Refusal.
//
// A write to a session's route of a cluster node (isReplicated) that
// names no request id gets one of the client's own (service.NewRequestID)
// as its Idempotency-Key, so that it can be sent again safely. A retryable
// answer is sent again, bounded by the client's Retry and paused by its
// backoff and the answer's Retry-After: a 503 refused before anything was
// proposed (Unavailable, Moved, a server stopping) always; a write of
// unknown outcome (UnknownOutcome) and a connection lost after the request
// went out only under a request id, or for a read, since a write that did
// commit is then answered from its record (a connection refused is not
// retried: no server is there). A write that got no answer at all is
// answered as a server answers one of unknown outcome, naming its request
// id. A cluster node's answer naming the group's leader ("leader_addr")
// sends it there, at once to a node not asked yet. A body is sent again
// when it can be: an in-memory body always, a stream only if nothing of it
// was read. The caller closes body.
func (c *Client) Send(ctx context.Context, call service.Call, method, u string, body io.Reader, contentType string) (*http.Response, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	read := method == http.MethodGet || method == http.MethodHead
	if !read && call.RequestID == "" && keyedRoute(u) && c.isReplicated(ctx) {
		call.RequestID = service.NewRequestID()
	}
	again := read || call.RequestID != ""
	f := newSends(u)
	until := time.Now().Add(c.retry.Within)
	for attempt := 1; ; attempt++ {
		resp, ref, err := c.send(ctx, call, method, u, body, contentType, f)
		if err == nil && ref == nil {
			return resp, func() { resp.Body.Close(); cancel() }, nil
		}
		retry := ctx.Err() == nil && attempt < c.retry.Attempts
		var retryAfter time.Duration
		next, fresh := u, false
		if err != nil {
			// A connection refused is no server to retry; one lost after
			// the request went out may have run it.
			retry = retry && again && !notSent(err)
		} else {
			retry = retry && (ref.NotCommitted() || again && ref.OutcomeUnknown())
			retryAfter = ref.RetryAfter
			if l, isNew := f.leader(ref); l != "" {
				next, fresh = l, isNew
			}
		}
		if retry && !fresh {
			pause := c.retry.Wait(attempt, retryAfter)
			retry = time.Now().Add(pause).Before(until) && service.Sleep(ctx, pause) == nil
		}
		if !retry || !f.again() {
			cancel()
			if err != nil && !read && !notSent(err) && errors.As(err, new(*lostAnswer)) {
				return nil, nil, unknownOutcome(err, call.RequestID)
			}
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, ref
		}
		u = next
	}
}

// send is one send of Send: a 2xx response, or the refusal it answered.
func (c *Client) send(ctx context.Context, call service.Call, method, u string, body io.Reader, contentType string, f *sends) (*http.Response, *rest.Refusal, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, f.first(body))
	if err != nil {
		return nil, nil, err
	}
	if err := f.body(req, body); err != nil {
		return nil, nil, fmt.Errorf("server %s: %w", req.URL.Host, err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	} else if call.Person {
		// --insecure-dev: the role comes with the request.
		req.Header.Set("X-Tally-Role", auth.RolePerson)
	}
	if call.Actor != "" {
		req.Header.Set("X-Tally-Actor", call.Actor) // read only by a server run with --insecure-dev
	}
	if call.RequestID != "" {
		req.Header.Set("Idempotency-Key", call.RequestID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, nil, &lostAnswer{fmt.Errorf("server %s: %w", c.serverOf(req), unwrapURLError(err))}
	}
	c.heardFrom(resp)
	if resp.StatusCode/100 == 2 {
		return resp, nil, nil
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("server %s: %w", c.serverOf(req), err)
	}
	ref := rest.ReadRefusal(resp.StatusCode, resp.Status, b)
	ref.RetryAfter = rest.ParseRetryAfter(resp.Header.Get("Retry-After"))
	return nil, ref, nil
}

// Exchange sends one request as call and returns the whole body of a 2xx
// answer as a Doc (Replayed when the server says so), or the server's
// refusal.
func (c *Client) Exchange(ctx context.Context, call service.Call, method, u string, body io.Reader, contentType string) (service.Doc, error) {
	resp, done, err := c.Send(ctx, call, method, u, body, contentType)
	if err != nil {
		return service.Doc{}, err
	}
	defer done()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 256<<20))
	if err != nil {
		return service.Doc{}, fmt.Errorf("server %s: %w", c.url, err)
	}
	return service.Doc{JSON: b, Replayed: resp.Header.Get(api.ReplayedHeader) == "true"}, nil
}

// Do is Exchange with a JSON body, or none when body is nil.
func (c *Client) Do(ctx context.Context, call service.Call, method, u string, body []byte) (service.Doc, error) {
	var rd io.Reader
	contentType := ""
	if body != nil {
		rd, contentType = bytes.NewReader(body), "application/json"
	}
	return c.Exchange(ctx, call, method, u, rd, contentType)
}

// verbURL is the URL of the verb v (its path in the verb table) in call's
// session, args its path's other parameters in order, with the query q.
func (c *Client) verbURL(v verb.Verb, call service.Call, q url.Values, args ...string) string {
	u := c.url + v.PathOf(call.Tenant, call.Session, args...)
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return u
}

// post sends doc, encoded, as the request of the verb called name.
func (c *Client) post(ctx context.Context, call service.Call, doc any, name string, args ...string) (service.Doc, error) {
	v := verb.Of(name)
	b, err := json.Marshal(doc)
	if err != nil {
		return service.Doc{}, fmt.Errorf("encode %s request: %w", name, err)
	}
	return c.Do(ctx, call, v.HTTP.Method, c.verbURL(v, call, nil, args...), b)
}

// get reads the verb called name with the query q, at call.Now if given,
// and at consistency=stale if the call or the client asks for it.
func (c *Client) get(ctx context.Context, call service.Call, q url.Values, name string, args ...string) (service.Doc, error) {
	if q == nil {
		q = url.Values{}
	}
	if !call.Now.IsZero() {
		q.Set("now", instant.Format(call.Now))
	}
	if call.Stale || c.stale {
		q.Set("consistency", service.Stale)
	}
	v := verb.Of(name)
	return c.Do(ctx, call, v.HTTP.Method, c.verbURL(v, call, q, args...), nil)
}

// Identity is who a request acts as, as the server sees it.
type Identity struct {
	Tenant, Actor, Role string
}

// Whoami asks the server who call acts as in call.Tenant: the token's
// identity, or, under --insecure-dev, call.Actor, which may be none.
func (c *Client) Whoami(ctx context.Context, call service.Call) (Identity, error) {
	doc, err := c.Do(ctx, call, "GET", c.url+"/v1/tenants/"+url.PathEscape(call.Tenant)+"/whoami", nil)
	if err != nil {
		return Identity{}, err
	}
	var d Identity
	if err := json.Unmarshal(doc.JSON, &d); err != nil || (d.Actor == "" && c.token != "") {
		return Identity{}, fmt.Errorf("server %s: whoami: no identity in %q", c.url, doc.JSON)
	}
	return d, nil
}

// CheckSession refuses a tenant or session name the server would not
// have, before anything is sent.
func CheckSession(tenant, session string) error {
	if err := sessionname.Check("tenant", tenant); err != nil {
		return err
	}
	return sessionname.Check("session", session)
}

// heardFrom notes what an answer says of its server: whether it is a
// cluster node.
func (c *Client) heardFrom(resp *http.Response) {
	if resp.Header.Get(api.ReplicatedHeader) == "true" {
		c.replicated.Store(true)
	}
	c.heard.Store(true)
}

// isReplicated reports whether the server is a cluster node, where a
// write's outcome can be unknown, asking its health once if no answer has
// said yet. A single server's writes are left as the caller sent them: a
// request id appends its record to the log, which would set a verb's
// sequence numbers apart from the same verb's on a local ledger.
func (c *Client) isReplicated(ctx context.Context) bool {
	if !c.heard.Load() {
		if req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/healthz", nil); err == nil {
			if resp, err := c.http.Do(req); err == nil {
				resp.Body.Close()
				c.heardFrom(resp)
			}
		}
	}
	return c.replicated.Load()
}

// lostAnswer is a request that got no answer: the server may have had it
// (a connection lost after it went out, a timeout) unless it never
// reached one (notSent).
type lostAnswer struct{ err error }

func (e *lostAnswer) Error() string { return e.err.Error() }
func (e *lostAnswer) Unwrap() error { return e.err }

// unknownOutcome is a write that got no answer as the client answers it:
// what a server answers a write that may have committed (503
// UnknownOutcome), naming its request id for a retry by hand.
func unknownOutcome(err error, requestID string) *rest.Refusal {
	var ms []api.Member
	if requestID != "" {
		ms = append(ms, api.M("request_id", api.S(requestID)))
	}
	return rest.NewRetryable(service.CodeUnknownOutcome, err.Error()+"; "+service.RetryAdvice(requestID), ms...)
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// answer is the result read from a response document, or the request's
// error.
func answer[T any](read func(service.Doc) (T, error), doc service.Doc, err error) (T, error) {
	if err != nil {
		var zero T
		return zero, err
	}
	return read(doc)
}
