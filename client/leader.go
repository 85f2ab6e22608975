package client

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"

	"tally/rest"
	"tally/service"
)

// Retry bounds how one request is sent again after a retryable answer
// (service.Retry: its zero value takes the defaults).
type Retry = service.Retry

// notSent reports whether a request that failed with err never reached a
// server (its connection was refused): it cannot have run.
func notSent(err error) bool {
	var op *net.OpError
	return errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &op) && op.Op == "dial"
}

// keyedRoute reports whether u is a session's route, where the server
// keeps a write's answer under its Idempotency-Key (the other writes, a
// token minted, an operator's request, keep none).
func keyedRoute(u string) bool {
	p, err := url.Parse(u)
	if err != nil {
		return false
	}
	rest, ok := strings.CutPrefix(p.Path, "/v1/tenants/")
	return ok && strings.Contains(rest, "/sessions/")
}

// sends is one request's sends: the nodes asked, and its body, which a
// later send sends again when it can (an in-memory body always, a stream
// only if nothing of it was read).
type sends struct {
	url     *url.URL
	seen    map[string]bool
	n       int
	getBody func() (io.ReadCloser, error)
	length  int64
	stream  *unreadBody
}

func newSends(u string) *sends {
	f := &sends{seen: map[string]bool{}}
	if p, err := url.Parse(u); err == nil {
		f.url = p
		f.seen[p.Host] = true
	}
	return f
}

// first is the body a send's request is made with: the caller's on the
// first send, none after (body sets it).
func (f *sends) first(body io.Reader) io.Reader {
	if f.n == 0 {
		return body
	}
	return nil
}

// body sets req's body for this send: the first sends it as given (an
// in-memory body, which net/http can rewind, or a stream behind a guard
// that tells whether it was read); a later one sends the rewound copy or
// the stream nobody read.
func (f *sends) body(req *http.Request, body io.Reader) error {
	defer func() { f.n++ }()
	switch {
	case f.n == 0 && req.GetBody != nil:
		f.getBody, f.length = req.GetBody, req.ContentLength
	case f.n == 0 && body != nil:
		f.stream = &unreadBody{r: body}
		req.Body = f.stream
		f.length = streamLength(body)
		req.ContentLength = f.length
	case f.getBody != nil:
		b, err := f.getBody()
		if err != nil {
			return err
		}
		req.Body, req.GetBody, req.ContentLength = b, f.getBody, f.length
	case f.stream != nil:
		f.stream = &unreadBody{r: f.stream.r}
		req.Body, req.ContentLength = f.stream, f.length
	}
	return nil
}

// streamLength is the length a stream declares, so that a server can
// refuse bytes over its bound before any is sent: what is left of a
// regular file, or of a reader that knows its length; 0 (none declared,
// the body goes chunked) otherwise.
func streamLength(body io.Reader) int64 {
	switch b := body.(type) {
	case *os.File:
		fi, err := b.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			return 0
		}
		off, err := b.Seek(0, io.SeekCurrent)
		if err != nil || off > fi.Size() {
			return 0
		}
		return fi.Size() - off
	case interface{ Len() int }:
		return int64(b.Len())
	}
	return 0
}

// again reports whether the body can be sent once more, and takes a stream
// nobody read from the request that had it.
func (f *sends) again() bool {
	return f.stream == nil || f.stream.detach()
}

// leader is the URL of the group's leader that ref names (503 naming
// "leader_addr", either code), with the request's path and query, or ""
// when it names none; fresh reports a node this request has not asked.
func (f *sends) leader(ref *rest.Refusal) (u string, fresh bool) {
	if f.url == nil || !(ref.NotCommitted() || ref.OutcomeUnknown()) {
		return "", false
	}
	var d struct {
		LeaderAddr string `json:"leader_addr"`
	}
	if json.Unmarshal(ref.Document, &d) != nil || d.LeaderAddr == "" {
		return "", false
	}
	scheme, host := f.url.Scheme, strings.TrimRight(d.LeaderAddr, "/")
	if i := strings.Index(host, "://"); i >= 0 {
		scheme, host = host[:i], host[i+3:]
	}
	if host == "" || strings.ContainsAny(host, "/?#@") {
		return "", false
	}
	fresh = !f.seen[host]
	f.seen[host] = true
	next := *f.url
	next.Scheme, next.Host = scheme, host
	return next.String(), fresh
}

// errDetached ends a request's reads of a stream given to the next send.
var errDetached = errors.New("body handed to the next send")

// unreadBody is a request's streamed body that tells whether any of it was
// read. Its owner closes the stream; a transport's Close does not.
type unreadBody struct {
	r     io.Reader
	state atomic.Int32 // 0 unread, 1 read from, 2 detached
}

func (u *unreadBody) Read(p []byte) (int, error) {
	if !u.state.CompareAndSwap(0, 1) && u.state.Load() != 1 {
		return 0, errDetached
	}
	return u.r.Read(p)
}

func (u *unreadBody) Close() error { return nil }

// detach takes the stream from a request that never read it, so no late
// read by that request's transport can take bytes from the next send's;
// it reports whether it did.
func (u *unreadBody) detach() bool { return u.state.CompareAndSwap(0, 2) }

// serverOf names the server req went to: the configured URL, or the
// leader a send followed.
func (c *Client) serverOf(req *http.Request) string {
	if base, err := url.Parse(c.url); err == nil && base.Host == req.URL.Host {
		return c.url
	}
	return req.URL.Scheme + "://" + req.URL.Host
}
