package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/expect"
	"tally/promise"
	"tally/refuse"
	"tally/service"
)

// The resources: a seat's open obligations and a session's, read as the
// caller, in the caller's tenant. A subscribed one sends
// notifications/resources/updated when a commit changes what it reads
// (where the binding gives Changes: `tally serve`).
const (
	owedTemplate        = "tally://owed/{seat}"
	sessionOwedTemplate = "tally://sessions/{session}/owed/{seat}"
	sessionOpenTemplate = "tally://sessions/{session}/open"
)

// resource is what a resource URI names.
type resource struct {
	session string // "" is the default session
	seat    string // "" is every open obligation of the session
}

// parseResource reads a tally:// URI.
func parseResource(uri string) (resource, error) {
	rest, ok := strings.CutPrefix(uri, "tally://")
	if !ok {
		return resource{}, sdk.ResourceNotFoundError(uri)
	}
	parts := strings.Split(rest, "/")
	for i, p := range parts {
		u, err := url.PathUnescape(p)
		if err != nil || u == "" {
			return resource{}, sdk.ResourceNotFoundError(uri)
		}
		parts[i] = u
	}
	switch {
	case len(parts) == 2 && parts[0] == "owed":
		return resource{seat: parts[1]}, nil
	case len(parts) == 4 && parts[0] == "sessions" && parts[2] == "owed":
		return resource{session: parts[1], seat: parts[3]}, nil
	case len(parts) == 3 && parts[0] == "sessions" && parts[2] == "open":
		return resource{session: parts[1]}, nil
	}
	return resource{}, sdk.ResourceNotFoundError(uri)
}

func (s *Server) addResources() {
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{Name: "owed", Title: "What a seat owes", URITemplate: owedTemplate, MIMEType: "application/json",
		Description: "What the seat owes in the default session: its open promises, as tally_promise_list answers them."}, s.readResource)
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{Name: "session_owed", Title: "What a seat owes in a session", URITemplate: sessionOwedTemplate, MIMEType: "application/json",
		Description: "What the seat owes in the session (of the caller's tenant): its open promises."}, s.readResource)
	s.mcp.AddResourceTemplate(&sdk.ResourceTemplate{Name: "session_open", Title: "A session's open obligations", URITemplate: sessionOpenTemplate, MIMEType: "application/json",
		Description: "The session's open obligations (of the caller's tenant), one document a family: its open promises (as tally_promise_list answers), then its open expectations (as tally_expect_list answers)."}, s.readResource)
}

func (s *Server) readResource(ctx context.Context, req *sdk.ReadResourceRequest) (*sdk.ReadResourceResult, error) {
	uri := req.Params.URI
	r, err := parseResource(uri)
	if err != nil {
		return nil, err
	}
	who, err := s.cfg.Identify(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	docs, err := s.render(ctx, who, r)
	if err != nil {
		return nil, fmt.Errorf("%s: %s", uri, strings.TrimSpace(string(errorDocument(err))))
	}
	res := &sdk.ReadResourceResult{}
	for _, d := range docs {
		res.Contents = append(res.Contents, &sdk.ResourceContents{URI: uri, MIMEType: "application/json", Text: string(d)})
	}
	return res, nil
}

// render is the documents a resource reads, at the server's clock: the
// list documents of the tools, so a resource says nothing a tool does not.
func (s *Server) render(ctx context.Context, who Who, r resource) ([][]byte, error) {
	ctx, c, release, err := s.readCall(ctx, who, r.session)
	if err != nil {
		return nil, err
	}
	defer release()
	ps, err := s.cfg.Service.ListPromises(ctx, c, promise.Filter{State: promise.FilterOpen, By: r.seat})
	if err != nil {
		return nil, err
	}
	if r.seat != "" {
		return [][]byte{ps.JSON}, nil
	}
	xs, err := s.cfg.Service.ListExpectations(ctx, c, expect.Filter{State: "open"})
	if err != nil {
		return nil, err
	}
	return [][]byte{ps.JSON, xs.JSON}, nil
}

// readCall is the Call of a read by who in the session arg names, at the
// server's clock, with ctx holding what the binding holds for a call until
// release.
func (s *Server) readCall(ctx context.Context, who Who, arg string) (context.Context, service.Call, func(), error) {
	tenant, session, err := s.where(who, arg)
	if err != nil {
		return ctx, service.Call{}, nil, err
	}
	release := func() {}
	if s.cfg.Hold != nil {
		ctx, release = s.cfg.Hold(ctx)
	}
	return ctx, service.Call{Tenant: tenant, Session: session, Actor: who.Actor, Person: who.Person, Now: s.cfg.Now().UTC()}, release, nil
}

// subscriptions are the resources subscribed to on this server, each
// watched through Config.Changes while any MCP session holds it.
type subscriptions struct {
	s     *Server
	mu    sync.Mutex
	byURI map[string]*watch // guarded by mu
	// bySession is what each MCP session subscribed to, released when it
	// ends: a host that goes away without unsubscribing holds nothing.
	bySession map[*sdk.ServerSession]map[string]bool // guarded by mu
	closed    bool                                   // guarded by mu
}

// watch is one subscribed resource: how many sessions hold it, and how to
// stop following it (follow keeps what it read last, so an update is sent
// only when that changes).
type watch struct {
	holders int
	stop    context.CancelFunc
}

func newSubscriptions(s *Server) *subscriptions {
	return &subscriptions{s: s, byURI: map[string]*watch{}, bySession: map[*sdk.ServerSession]map[string]bool{}}
}

func (ss *subscriptions) subscribe(ctx context.Context, req *sdk.SubscribeRequest) error {
	uri := req.Params.URI
	r, err := parseResource(uri)
	if err != nil {
		return err
	}
	who, err := ss.s.cfg.Identify(ctx, req.Extra)
	if err != nil {
		return err
	}
	tenant, session, err := ss.s.where(who, r.session)
	if err != nil {
		return fmt.Errorf("%s: %w", uri, err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closed {
		return fmt.Errorf("%s: the server is closing", uri)
	}
	mine := ss.bySession[req.Session]
	if mine[uri] {
		return nil // subscribed already
	}
	w, ok := ss.byURI[uri]
	if !ok && len(ss.byURI) >= ss.s.cfg.SubscriptionsMax {
		return refuse.Invalidf("uri", fmt.Sprintf("at most %d resources are subscribed to at once", ss.s.cfg.SubscriptionsMax))
	}
	if mine == nil {
		mine = map[string]bool{}
		ss.bySession[req.Session] = mine
		if req.Session != nil {
			go func() {
				req.Session.Wait()
				ss.end(req.Session)
			}()
		}
	}
	mine[uri] = true
	if ok {
		w.holders++
		return nil
	}
	w = &watch{holders: 1}
	ss.byURI[uri] = w
	if ss.s.cfg.Changes == nil {
		return nil // read on demand; nothing here announces a change
	}
	wctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	changes, err := ss.s.cfg.Changes(wctx, tenant, session)
	if err != nil {
		stop()
		delete(ss.byURI, uri)
		delete(mine, uri)
		return fmt.Errorf("%s: %w", uri, err)
	}
	last, _ := ss.s.render(wctx, who, r)
	go ss.follow(wctx, uri, who, r, changes, bytes.Join(last, nil))
	return nil
}

// follow sends an update for uri each time a change makes it read
// otherwise, until its watch stops.
func (ss *subscriptions) follow(ctx context.Context, uri string, who Who, r resource, changes <-chan struct{}, last []byte) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-changes:
			if !ok {
				return
			}
		}
		docs, err := ss.s.render(ctx, who, r)
		doc := bytes.Join(docs, nil)
		if err != nil || bytes.Equal(doc, last) {
			continue
		}
		last = doc
		if err := ss.s.mcp.ResourceUpdated(ctx, &sdk.ResourceUpdatedNotificationParams{URI: uri}); err != nil {
			ss.s.cfg.Logger.Warn("resource update not sent", "uri", uri, "err", err)
		}
	}
}

func (ss *subscriptions) unsubscribe(_ context.Context, req *sdk.UnsubscribeRequest) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if mine := ss.bySession[req.Session]; mine[req.Params.URI] {
		delete(mine, req.Params.URI)
		ss.release(req.Params.URI)
	}
	return nil
}

// end releases what an MCP session that ended had subscribed to.
func (ss *subscriptions) end(session *sdk.ServerSession) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for uri := range ss.bySession[session] {
		ss.release(uri)
	}
	delete(ss.bySession, session)
}

// release drops one holder of uri, stopping its watch with the last.
// Called with mu held.
func (ss *subscriptions) release(uri string) {
	w, ok := ss.byURI[uri]
	if !ok {
		return
	}
	if w.holders--; w.holders == 0 {
		if w.stop != nil {
			w.stop()
		}
		delete(ss.byURI, uri)
	}
}

func (ss *subscriptions) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for uri, w := range ss.byURI {
		if w.stop != nil {
			w.stop()
		}
		delete(ss.byURI, uri)
	}
}
