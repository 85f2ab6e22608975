package server

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"tally/ledger"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// Error codes of the session cache (HTTP problem bodies; do not rename).
const (
	// CodeNoSuchSession: a read named a session that has no log. Reads
	// never create sessions; the first accepted write does.
	CodeNoSuchSession = service.CodeNoSuchSession
	// CodeSessionQuotaExceeded: a write would create a session beyond the
	// tenant's quota (Config.TenantSessionsMax).
	CodeSessionQuotaExceeded = service.CodeSessionQuotaExceeded
)

// sessionEntry is one session in the cache of open sessions.
//
// Invariant: idle != nil exactly when refs == 0, the entry is open (ready
// closed, err nil) and it is not closing; only such entries are evicted.
type sessionEntry struct {
	key, tenant, dir string
	ready            chan struct{} // closed when the open ended (l or err set)
	err              error
	l                *ledger.Ledger
	stopWatch        func() // stops the session's timekeeper and waits; nil if none
	refs             int    // requests and streams using l: never closed while > 0
	visits           int    // metrics visits: an idle entry being read keeps its place
	idle             *list.Element
	closing          chan struct{} // non-nil once chosen for closing; closed when closed
	// fresh: the session had no record when opened and none has been seen
	// since; released so, it is closed and uncounted, and removed from disk
	// if created (this process made its log), so a refused first write
	// leaves nothing behind.
	fresh, created bool
}

// sessionCache is the server's open sessions: a bounded cache, least
// recently used first out, over the sessions on disk. Fields guarded by
// Server.mu.
type sessionCache struct {
	open      map[string]*sessionEntry // tenant/session → entry, closing ones included
	idle      *list.List               // entries with no user, least recently used at the front
	closingN  int                      // entries of open that are closing
	onDisk    map[string]struct{}      // tenant/session of every session with a log
	perTenant map[string]int           // sessions on disk by tenant: the quota's count
	closers   sync.WaitGroup           // evictions under way
	dirMu     sync.Mutex               // orders making and removing session directories
}

// loadSessions counts the sessions on disk under root, for the quota.
func loadSessions(root string) (*sessionCache, error) {
	c := &sessionCache{open: map[string]*sessionEntry{}, idle: list.New(), onDisk: map[string]struct{}{}, perTenant: map[string]int{}}
	ss, err := store.Sessions(root, "")
	if err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	for _, se := range ss {
		dir, err := store.SessionDir(root, se.Tenant, se.Name)
		if err == nil && store.HasLog(dir) {
			c.onDisk[se.String()] = struct{}{}
			c.perTenant[se.Tenant]++
		}
	}
	return c, nil
}

// sessionHolds are the sessions one request uses, released when it ends.
type sessionHolds struct {
	mu      sync.Mutex
	entries []*sessionEntry
}

type sessionHoldsKey struct{}

// withSessionHolds returns ctx carrying a fresh set of holds and the func
// that releases them.
func (s *Server) withSessionHolds(ctx context.Context) (context.Context, func()) {
	h := &sessionHolds{}
	return context.WithValue(ctx, sessionHoldsKey{}, h), func() {
		h.mu.Lock()
		es := h.entries
		h.entries = nil
		h.mu.Unlock()
		for _, e := range es {
			s.release(e)
		}
	}
}

// errShuttingDown refuses a session to a request that arrives during Close.
var errShuttingDown = statusError{http.StatusServiceUnavailable, service.CodeShuttingDown, "server is shutting down"}

// sessionIn returns the ledger of tenant/session for the request of ctx,
// held open until that request ends. A session without a log is created
// only when create is set (a write); a read of one gets NoSuchSession and
// touches nothing on disk. A session created here and left without a
// record when the request ends is removed again.
func (s *Server) sessionIn(ctx context.Context, tenant, session string, create bool) (*ledger.Ledger, error) {
	h, _ := ctx.Value(sessionHoldsKey{}).(*sessionHolds)
	if h == nil {
		return nil, errors.New("session: the request carries no session holds")
	}
	e, err := s.acquire(ctx, tenant, session, create)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.entries = append(h.entries, e)
	h.mu.Unlock()
	return e.l, nil
}

// serverSessions are the cache's sessions as the service opens them: each
// held for the request of its ctx.
type serverSessions struct{ s *Server }

func (ss serverSessions) Open(ctx context.Context, tenant, session string, create bool) (*ledger.Ledger, error) {
	return ss.s.sessionIn(ctx, tenant, session, create)
}

// Visit holds tenant/session (never creating it) while fn runs on its
// ledger, and releases it at once: a verify of every session keeps the
// open bound.
func (ss serverSessions) Visit(ctx context.Context, tenant, session string, fn func(*ledger.Ledger)) error {
	e, err := ss.s.acquire(ctx, tenant, session, false)
	if err != nil {
		return err
	}
	defer ss.s.release(e)
	fn(e.l)
	return nil
}

// session opens tenant/session (creating it) and keeps it open for the
// server's life: for tests and tools that hold a ledger outside a request.
func (s *Server) session(tenant, session string) (*ledger.Ledger, error) {
	e, err := s.acquire(context.Background(), tenant, session, true)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	e.fresh = false // pinned: never released, so never removed
	s.mu.Unlock()
	return e.l, nil
}

// acquire returns the open entry of tenant/session with one more user.
func (s *Server) acquire(ctx context.Context, tenant, session string, create bool) (*sessionEntry, error) {
	dir, err := store.SessionDir(s.cfg.Root, tenant, session)
	if err != nil {
		return nil, badRequest{err.Error()}
	}
	key := tenant + "/" + session
	c := s.sessions
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errShuttingDown
		}
		if e, ok := c.open[key]; ok {
			wait := e.closing
			select {
			case <-e.ready:
			default:
				wait = e.ready
			}
			if wait != nil {
				s.mu.Unlock()
				select {
				case <-wait:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				continue // look again: the open may have failed, the close ended
			}
			e.refs++
			if e.idle != nil {
				c.idle.Remove(e.idle)
				e.idle = nil
			}
			s.mu.Unlock()
			return e, nil
		}
		_, exists := c.onDisk[key]
		if !exists && store.HasLog(dir) { // made by another process since
			exists = true
			c.onDisk[key] = struct{}{}
			c.perTenant[tenant]++
		}
		if !exists && !create {
			s.mu.Unlock()
			return nil, refuse.New(CodeNoSuchSession, "session", "no session "+key+": reads never create one; its first accepted write does")
		}
		if !exists {
			if n := c.perTenant[tenant]; n >= s.cfg.TenantSessionsMax {
				s.mu.Unlock()
				return nil, refuse.New(CodeSessionQuotaExceeded, "session", fmt.Sprintf("tenant %s holds %d sessions, its quota (--tenant-sessions %d): write to an existing session", tenant, n, s.cfg.TenantSessionsMax))
			}
			// Counted now, so concurrent creations cannot pass the quota.
			c.onDisk[key] = struct{}{}
			c.perTenant[tenant]++
		}
		e := &sessionEntry{key: key, tenant: tenant, dir: dir, ready: make(chan struct{}), refs: 1, fresh: !exists}
		c.open[key] = e
		victims := s.evictLocked()
		s.mu.Unlock()
		s.closeLater(victims)

		l, stop, err := s.openEntry(e)
		s.mu.Lock()
		e.l, e.stopWatch, e.err = l, stop, err
		close(e.ready)
		if err != nil {
			delete(c.open, key)
			s.mu.Unlock()
			if e.fresh {
				s.removeIfEmpty(e)
			}
			return nil, err
		}
		s.mu.Unlock()
		return e, nil
	}
}

// openEntry opens an entry's ledger and starts its timekeeper.
func (s *Server) openEntry(e *sessionEntry) (*ledger.Ledger, func(), error) {
	if e.fresh {
		c := s.sessions
		c.dirMu.Lock()
		_, err := os.Stat(store.LogPath(e.dir))
		e.created = errors.Is(err, os.ErrNotExist)
		err = os.MkdirAll(e.dir, 0o755)
		c.dirMu.Unlock()
		if err != nil {
			return nil, nil, fmt.Errorf("create session: %w", err)
		}
	}
	l, err := ledger.Open(e.dir, s.cfg.Ledger)
	if err != nil {
		return nil, nil, err
	}
	return l, s.startTimekeeper(e.key, l), nil
}

// release gives back one use of e. The last user of a fresh session that
// gained no record removes it; otherwise e joins the idle list and the
// least recently used idle sessions over the bound are closed.
func (s *Server) release(e *sessionEntry) {
	c := s.sessions
	s.mu.Lock()
	if e.refs--; e.refs > 0 {
		s.mu.Unlock()
		return
	}
	if e.fresh && e.l.Durable().Seq == 0 && !s.closed {
		e.closing = make(chan struct{})
		c.closingN++
		s.mu.Unlock()
		s.closeEntry(e)
		return
	}
	e.fresh = false
	if s.closed {
		s.mu.Unlock()
		return
	}
	e.idle = c.idle.PushBack(e)
	victims := s.evictLocked()
	s.mu.Unlock()
	s.closeLater(victims)
}

// evictLocked picks the idle sessions to close so that at most
// Config.SessionsOpen stay open, least recently used first. Sessions in
// use are never picked: when all are, the bound is exceeded until some
// are released.
func (s *Server) evictLocked() []*sessionEntry {
	c := s.sessions
	var victims []*sessionEntry
	next := c.idle.Front()
	for len(c.open)-c.closingN > s.cfg.SessionsOpen && next != nil {
		el := next
		next = el.Next()
		e := el.Value.(*sessionEntry)
		if e.visits > 0 {
			continue
		}
		c.idle.Remove(el)
		e.idle = nil
		e.closing = make(chan struct{})
		c.closingN++
		victims = append(victims, e)
	}
	return victims
}

// closeLater closes evicted sessions off the request's path.
func (s *Server) closeLater(victims []*sessionEntry) {
	if len(victims) == 0 {
		return
	}
	c := s.sessions
	c.closers.Add(1)
	go func() {
		defer c.closers.Done()
		for _, e := range victims {
			s.closeEntry(e)
		}
	}()
}

// closeEntry closes a session chosen for closing (closing set, no user):
// its timekeeper first, then its ledger; a fresh one without a record is
// removed from disk. Requests for it wait until it is done.
func (s *Server) closeEntry(e *sessionEntry) {
	if e.stopWatch != nil {
		e.stopWatch()
	}
	if err := e.l.Close(); err != nil {
		s.cfg.Logger.Warn("closing an idle session", "session", e.key, "err", err)
	}
	if e.fresh {
		s.removeIfEmpty(e)
	}
	c := s.sessions
	s.mu.Lock()
	if c.open[e.key] == e {
		delete(c.open, e.key)
	}
	c.closingN--
	close(e.closing)
	s.mu.Unlock()
}

// removeIfEmpty uncounts a fresh session whose log is still empty and, if
// this process created it, removes its directory, and its tenant's if
// that is left empty. A log that gained lines (another process wrote) stays.
func (s *Server) removeIfEmpty(e *sessionEntry) {
	c := s.sessions
	c.dirMu.Lock()
	empty := !store.HasLog(e.dir)
	if empty && e.created {
		if err := os.RemoveAll(e.dir); err != nil {
			s.cfg.Logger.Warn("removing a session left without a record", "session", e.key, "err", err)
		}
		_ = os.Remove(filepath.Dir(e.dir)) // only if no other session is there
	}
	c.dirMu.Unlock()
	if empty {
		s.mu.Lock()
		delete(c.onDisk, e.key)
		c.perTenant[e.tenant]--
		s.mu.Unlock()
	}
}

// closeSessions closes every open session at shutdown (Server.closed set,
// timekeepers stopped).
func (s *Server) closeSessions() error {
	c := s.sessions
	c.closers.Wait()
	s.mu.Lock()
	es := make([]*sessionEntry, 0, len(c.open))
	for _, e := range c.open {
		select {
		case <-e.ready:
			if e.err == nil && e.closing == nil {
				e.closing = make(chan struct{})
				c.closingN++
				es = append(es, e)
			}
		default:
		}
	}
	s.mu.Unlock()
	var errs []error
	for _, e := range es {
		if e.stopWatch != nil {
			e.stopWatch()
		}
		errs = append(errs, e.l.Close())
		s.mu.Lock()
		delete(c.open, e.key)
		c.closingN--
		close(e.closing)
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

// eachSession visits the open sessions (for metrics), each held while it
// is visited.
func (s *Server) eachSession(fn func(key string, l *ledger.Ledger)) {
	c := s.sessions
	s.mu.Lock()
	var es []*sessionEntry
	for _, e := range c.open {
		select {
		case <-e.ready:
		default:
			continue
		}
		if e.err != nil || e.closing != nil || e.fresh || s.closed {
			continue
		}
		e.visits++ // not refs: a visit leaves an idle session's place in the list
		es = append(es, e)
	}
	s.mu.Unlock()
	for _, e := range es {
		fn(e.key, e.l)
		s.mu.Lock()
		e.visits--
		victims := s.evictLocked()
		s.mu.Unlock()
		s.closeLater(victims)
	}
}
