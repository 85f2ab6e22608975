package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/promise"
	"tally/rest"
	"tally/service"
)

// hop is a node in front of a cluster: it answers 503 Unavailable naming
// leaderAddr (when set), or, with next set, passes the request on to it,
// and records the Idempotency-Key and body of every request it got.
type hop struct {
	mu         sync.Mutex
	leaderAddr string
	next       http.Handler
	keys       []string
	bodies     []string
}

func (h *hop) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if replicatedHealth(w, r, true) {
		return
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	h.mu.Lock()
	h.keys, h.bodies = append(h.keys, r.Header.Get("Idempotency-Key")), append(h.bodies, string(b))
	next, leader := h.next, h.leaderAddr
	h.mu.Unlock()
	if next != nil {
		next.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprint(w, unavailableDoc(leader))
}

func (h *hop) got() ([]string, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.keys...), append([]string(nil), h.bodies...)
}

func unavailableDoc(leaderAddr string) string {
	if leaderAddr == "" {
		return `{"error":"group 2 unavailable at this node: no leader","code":"Unavailable","group":2}` + "\n"
	}
	return `{"error":"group 2 unavailable at this node: not the leader; its leader is node 1 at ` + leaderAddr +
		`","code":"Unavailable","group":2,"leader":1,"leader_addr":"` + leaderAddr + `"}` + "\n"
}

// startHop starts h on 127.0.0.1 and returns its host:port.
func startHop(t *testing.T, h *hop) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return strings.TrimPrefix(ts.URL, "http://")
}

// clientAt is c pointed at the node addr, with c's token.
func clientAt(t *testing.T, c *Client, addr string) *Client {
	t.Helper()
	at, err := New(Config{URL: "http://" + addr, Token: c.token, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// A write sent to a node that is not the leader goes on to the leader the
// answer names, under the same Idempotency-Key and with the same body; it
// lands once, and its retry through the same node is the recorded answer.
func TestClientFollowsLeader(t *testing.T) {
	cs, srv := serve(t, map[string]string{"reviewer": "agent"})
	target, _ := url.Parse(srv)
	leader := &hop{next: httputil.NewSingleHostReverseProxy(target)}
	follower := &hop{leaderAddr: startHop(t, leader)}
	c := clientAt(t, cs["reviewer"], startHop(t, follower))
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main", RequestID: "k-follow"}
	d := api.PromiseDeclare{ID: "r1", Promise: "x", To: "author", Until: "2h"}
	w, err := c.DeclarePromise(ctx, call, d)
	if err != nil || w.Replayed || w.Seq != 1 {
		t.Fatalf("declare through a follower: %+v %v", w, err)
	}
	again, err := c.DeclarePromise(ctx, call, d)
	if err != nil || !again.Replayed || !bytes.Equal(again.JSON, w.JSON) {
		t.Fatalf("its retry: replayed=%v %v", again.Replayed, err)
	}
	fk, fb := follower.got()
	lk, lb := leader.got()
	if len(fk) != 2 || len(lk) != 2 || fk[0] != "k-follow" || lk[0] != "k-follow" || lk[1] != "k-follow" || fb[0] == "" || lb[0] != fb[0] || lb[1] != fb[1] {
		t.Fatalf("keys follower %q leader %q; bodies follower %q leader %q", fk, lk, fb, lb)
	}
	list, err := cs["reviewer"].ListPromises(ctx, service.Call{Tenant: "acme", Session: "main"}, promise.Filter{State: "all"})
	if err != nil || len(list.Promises) != 1 {
		t.Fatalf("the write landed %d times: %v", len(list.Promises), err)
	}
	// A read follows too, its query kept.
	shown, err := c.Promise(ctx, service.Call{Tenant: "acme", Session: "main", Now: t0.Add(3 * time.Hour)}, "r1")
	if err != nil || !shown.Promise.Overdue {
		t.Fatalf("show through a follower: %+v %v", shown, err)
	}
}

// Two nodes naming each other: the first hop goes at once, every later
// send after a pause, until the sends are spent; then the last refusal as
// the node sent it. A chain of nodes is followed at once, node after node,
// as far as the sends go.
func TestClientLeaderLoopBounded(t *testing.T) {
	a, b := &hop{}, &hop{}
	addrA, addrB := startHop(t, a), startHop(t, b)
	a.mu.Lock()
	a.leaderAddr = addrB
	a.mu.Unlock()
	b.mu.Lock()
	b.leaderAddr = "http://" + addrA + "/"
	b.mu.Unlock()
	c := clientAt(t, &Client{}, addrA)
	c.retry = Retry{Attempts: 4, Within: 5 * time.Second, Pause: time.Millisecond}.WithDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	call := service.Call{Tenant: "acme", Session: "main", RequestID: "k-loop"}
	_, err := c.DeclarePromise(ctx, call, api.PromiseDeclare{ID: "r1", Promise: "x", To: "author", Until: "2h"})
	var ref *rest.Refusal
	if !errors.As(err, &ref) || ref.Status != http.StatusServiceUnavailable || ref.Code != "Unavailable" || string(ref.Document) != unavailableDoc("http://"+addrA+"/") {
		t.Fatalf("a loop: %v", err)
	}
	if ka, _ := a.got(); len(ka) != 2 {
		t.Fatalf("node a asked %d times", len(ka))
	}
	if kb, _ := b.got(); len(kb) != 2 || kb[0] != "k-loop" || kb[1] != "k-loop" {
		t.Fatalf("node b asked %q", kb)
	}

	const sends = 3
	chain := make([]*hop, sends+2)
	next := ""
	for i := len(chain) - 1; i >= 0; i-- {
		chain[i] = &hop{leaderAddr: next}
		if i == len(chain)-1 {
			chain[i].leaderAddr = "127.0.0.1:1" // never reached
		}
		next = startHop(t, chain[i])
	}
	cc := clientAt(t, &Client{}, next)
	cc.retry.Attempts = sends
	if _, err := cc.Promise(ctx, service.Call{Tenant: "acme", Session: "main"}, "r1"); !errors.As(err, &ref) || ref.Code != "Unavailable" {
		t.Fatalf("a chain: %v", err)
	}
	for i, h := range chain {
		if k, _ := h.got(); len(k) != map[bool]int{true: 1, false: 0}[i < sends] {
			t.Fatalf("node %d of the chain asked %d times", i, len(k))
		}
	}
}

// A 503 naming no leader is sent again to the same node until the sends
// are spent; a streamed body already sent is the refusal as the node sent
// it, asked once.
func TestClientLeaderNotFollowed(t *testing.T) {
	none := &hop{}
	c := clientAt(t, &Client{}, startHop(t, none))
	c.retry = Retry{Attempts: 3, Pause: time.Millisecond}.WithDefaults()
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main", RequestID: "k-none"}
	_, err := c.DeclarePromise(ctx, call, api.PromiseDeclare{ID: "r1", Promise: "x", To: "author", Until: "2h"})
	var ref *rest.Refusal
	if !errors.As(err, &ref) || ref.Status != http.StatusServiceUnavailable || string(ref.Document) != unavailableDoc("") {
		t.Fatalf("no leader named: %v", err)
	}
	if k, _ := none.got(); len(k) != 3 {
		t.Fatalf("asked %d times", len(k))
	}

	leader := &hop{}
	follower := &hop{leaderAddr: startHop(t, leader)}
	c = clientAt(t, &Client{}, startHop(t, follower))
	c.retry = Retry{Attempts: 2, Pause: time.Millisecond}.WithDefaults()
	stream := struct{ io.Reader }{strings.NewReader("the artifact's bytes")} // not rewindable
	_, err = c.PublishArtifact(ctx, call, api.ClaimPublish{Claim: "c1", Artifact: "a1", Name: "a.txt"}, stream)
	if !errors.As(err, &ref) || ref.Status != http.StatusServiceUnavailable || string(ref.Document) != unavailableDoc(follower.leaderAddr) {
		t.Fatalf("a stream sent: %v", err)
	}
	if k, _ := leader.got(); len(k) != 0 {
		t.Fatalf("the leader got a stream already read: %d requests", len(k))
	}
	// The same upload from memory is sent again.
	_, err = c.PublishArtifact(ctx, call, api.ClaimPublish{Claim: "c1", Artifact: "a1", Name: "a.txt"}, strings.NewReader("the artifact's bytes"))
	if _, lb := leader.got(); !errors.As(err, &ref) || len(lb) != 1 || lb[0] != "the artifact's bytes" {
		t.Fatalf("an upload from memory: %v, the leader got %q", err, lb)
	}
}

// A write given no request id gets one of the client's own, in the form
// of a --request-id, and carries it to the leader the 503 names.
func TestClientWriteWithoutKeyGetsOne(t *testing.T) {
	leader := &hop{}
	follower := &hop{leaderAddr: startHop(t, leader)}
	c := clientAt(t, &Client{}, startHop(t, follower))
	c.retry = Retry{Attempts: 2, Pause: time.Millisecond}.WithDefaults()
	_, err := c.DeclarePromise(context.Background(), service.Call{Tenant: "acme", Session: "main"}, api.PromiseDeclare{ID: "r1", Promise: "x", To: "author", Until: "2h"})
	var ref *rest.Refusal
	if !errors.As(err, &ref) || ref.Status != http.StatusServiceUnavailable || string(ref.Document) != unavailableDoc("") {
		t.Fatalf("a write without a key: %v", err)
	}
	fk, _ := follower.got()
	lk, _ := leader.got()
	if len(fk) != 1 || len(lk) != 1 || !strings.HasPrefix(fk[0], "req-") || len(fk[0]) != 36 || lk[0] != fk[0] {
		t.Fatalf("keys: follower %q, leader %q", fk, lk)
	}
}
