package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"

	"tally/service"
)

// maxLeaderHops bounds how many times one request follows a cluster node's
// not-leader answer to another node.
const maxLeaderHops = 3

// codeUnavailable is a cluster node's retryable refusal code (503): the
// node cannot serve the request now and, when it knows one, names the
// group's leader as "leader_addr".
const codeUnavailable = "Unavailable"

// leaderHops follows one request's not-leader answers: once per distinct
// node, at most maxLeaderHops times, and only while its body can be sent
// again whole.
type leaderHops struct {
	url     *url.URL
	seen    map[string]bool
	hops    int
	getBody func() (io.ReadCloser, error)
	length  int64
	stream  *unreadBody
}

func newLeaderHops(u string) *leaderHops {
	f := &leaderHops{seen: map[string]bool{}}
	if p, err := url.Parse(u); err == nil {
		f.url = p
		f.seen[p.Host] = true
	}
	return f
}

// first is the body a hop's request is made with: the caller's on the
// first hop, none after (body sets it).
func (f *leaderHops) first(body io.Reader) io.Reader {
	if f.hops == 0 {
		return body
	}
	return nil
}

// body sets req's body for this hop: the first hop sends it as given (an
// in-memory body, which net/http can rewind, or a stream behind a guard
// that tells whether it was read); a later hop sends the rewound copy or
// the stream nobody read.
func (f *leaderHops) body(req *http.Request, body io.Reader) error {
	switch {
	case f.hops == 0 && req.GetBody != nil:
		f.getBody, f.length = req.GetBody, req.ContentLength
	case f.hops == 0 && body != nil:
		f.stream = &unreadBody{r: body}
		req.Body = f.stream
	case f.getBody != nil:
		b, err := f.getBody()
		if err != nil {
			return err
		}
		req.Body, req.GetBody, req.ContentLength = b, f.getBody, f.length
	case f.stream != nil:
		f.stream = &unreadBody{r: f.stream.r}
		req.Body = f.stream
	}
	return nil
}

// next is the URL to send the request to after ref, the answer of the
// node it went to, or "" when ref is the answer: not a not-leader answer,
// no leader named, a node already asked (a loop), the hops spent, or a
// body already sent in part.
func (f *leaderHops) next(ref *service.Refusal) string {
	if ref.Status != http.StatusServiceUnavailable || ref.Code != codeUnavailable || f.url == nil || f.hops >= maxLeaderHops {
		return ""
	}
	var d struct {
		LeaderAddr string `json:"leader_addr"`
	}
	if json.Unmarshal(ref.Document, &d) != nil || d.LeaderAddr == "" {
		return ""
	}
	scheme, host := f.url.Scheme, strings.TrimRight(d.LeaderAddr, "/")
	if i := strings.Index(host, "://"); i >= 0 {
		scheme, host = host[:i], host[i+3:]
	}
	if host == "" || strings.ContainsAny(host, "/?#@") || f.seen[host] {
		return ""
	}
	if f.stream != nil && !f.stream.detach() {
		return "" // a stream cannot be sent twice
	}
	f.seen[host] = true
	f.hops++
	u := *f.url
	u.Scheme, u.Host = scheme, host
	return u.String()
}

// errDetached ends a request's reads of a stream given to the next hop.
var errDetached = errors.New("body handed to the group's leader")

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
// read by that request's transport can take bytes from the next hop's; it
// reports whether it did.
func (u *unreadBody) detach() bool { return u.state.CompareAndSwap(0, 2) }

// serverOf names the server req went to: the configured URL, or the
// leader a hop followed.
func (c *Client) serverOf(req *http.Request) string {
	if base, err := url.Parse(c.url); err == nil && base.Host == req.URL.Host {
		return c.url
	}
	return req.URL.Scheme + "://" + req.URL.Host
}
