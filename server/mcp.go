package server

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"time"

	mcpauth "github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/auth"
	"tally/mcp"
	"tally/service"
)

// MCP over streamable HTTP at /mcp: the same Service as the REST routes,
// the same bearer tokens. A token acts as its identity in its tenant only;
// each tenant has an MCP server of its own, so a resource update reaches
// only the sessions of the tenant whose ledger changed. Under
// --insecure-dev a request acts as its X-Tally-Actor header, in any tenant.

// mcpPath is where MCP is served.
const mcpPath = "/mcp"

// mcpTenantsMax bounds the per-tenant MCP servers kept; past it the
// longest unused is dropped (its sessions end; clients reconnect).
const mcpTenantsMax = 1024

func (s *Server) mcpRoutes() []route {
	h := s.newMCPHandler()
	summary := "MCP over streamable HTTP: tally's verbs as tools, a seat's obligations as resources (bearer token; the token's tenant)"
	return []route{
		{name: "mcp", method: "POST", pattern: mcpPath, summary: summary, handle: h.ServeHTTP},
		{name: "mcp.stream", method: "GET", pattern: mcpPath, summary: "MCP: the session's stream of server notifications (resource updates)", handle: h.ServeHTTP},
		{name: "mcp.end", method: "DELETE", pattern: mcpPath, summary: "MCP: end the session", handle: h.ServeHTTP},
	}
}

// mcpServers are the MCP servers by tenant ("" under --insecure-dev).
type mcpServers struct {
	mu   sync.Mutex
	by   map[string]*mcpEntry // guarded by mu
	tick uint64               // guarded by mu: a use counter for least-recently-used
}

type mcpEntry struct {
	srv  *mcp.Server
	used uint64
}

func (s *Server) newMCPHandler() http.Handler {
	servers := &mcpServers{by: map[string]*mcpEntry{}}
	stream := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		tenant := ""
		if ti := mcpauth.TokenInfoFromContext(r.Context()); ti != nil {
			tenant, _ = ti.Extra["tenant"].(string)
		}
		srv, err := servers.get(tenant, func() (*mcp.Server, error) { return s.newMCP(tenant) })
		if err != nil {
			s.cfg.Logger.Error("mcp server", "tenant", tenant, "err", err)
			return nil // the SDK answers 400
		}
		return srv.MCP()
	}, &sdk.StreamableHTTPOptions{Logger: s.cfg.Logger, MaxRequestBodyBytes: s.cfg.BodyMax, SessionTimeout: s.cfg.IdleTimeout * 5,
		// The SDK refuses a loopback connection whose Host is not loopback,
		// against DNS rebinding of an open local server. A bearer token is
		// what a rebinding page cannot send, and a reverse proxy on the
		// same host forwards its own Host: only --insecure-dev keeps it.
		DisableLocalhostProtection: !s.cfg.Insecure})
	if s.cfg.Insecure {
		return stream
	}
	return mcpauth.RequireBearerToken(s.verifyMCPToken, &mcpauth.RequireBearerTokenOptions{AllowMissingExpiration: true})(stream)
}

// verifyMCPToken authenticates a bearer token as REST does.
func (s *Server) verifyMCPToken(_ context.Context, secret string, _ *http.Request) (*mcpauth.TokenInfo, error) {
	tok, err := s.tokens.Authenticate(strings.TrimSpace(secret))
	if err != nil {
		return nil, mcpauth.ErrInvalidToken
	}
	p := s.principalOf(tok.Participant, tok.Role)
	// UserID binds an MCP session to its token's identity: another token
	// cannot continue it.
	return &mcpauth.TokenInfo{UserID: tok.Tenant + "/" + p.actor, Extra: map[string]any{"tenant": tok.Tenant, "actor": p.actor, "role": p.role}}, nil
}

func (ms *mcpServers) get(tenant string, make func() (*mcp.Server, error)) (*mcp.Server, error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	ms.tick++
	if e, ok := ms.by[tenant]; ok {
		e.used = ms.tick
		return e.srv, nil
	}
	if len(ms.by) >= mcpTenantsMax {
		oldest := ""
		for t, e := range ms.by {
			if oldest == "" || e.used < ms.by[oldest].used {
				oldest = t
			}
		}
		ms.by[oldest].srv.Close()
		delete(ms.by, oldest)
	}
	srv, err := make()
	if err != nil {
		return nil, err
	}
	ms.by[tenant] = &mcpEntry{srv: srv, used: ms.tick}
	return srv, nil
}

// newMCP is the MCP server of tenant over the server's Service.
func (s *Server) newMCP(tenant string) (*mcp.Server, error) {
	cfg := mcp.DefaultConfig()
	cfg.Service = s.local
	cfg.Identify = func(_ context.Context, extra *sdk.RequestExtra) (mcp.Who, error) {
		if s.cfg.Insecure {
			var h http.Header
			if extra != nil {
				h = extra.Header
			}
			p := s.principalOf(h.Get("X-Tally-Actor"), h.Get("X-Tally-Role"))
			return mcp.Who{Actor: p.actor, Person: p.role == auth.RolePerson}, nil
		}
		if extra == nil {
			// A request the SDK makes of itself (a subscription of a
			// subscriptions/listen stream) carries no HTTP request; the
			// stream's own was authenticated for this tenant's server. It
			// reads as no one, in this tenant only.
			return mcp.Who{Tenant: tenant}, nil
		}
		if extra.TokenInfo == nil {
			return mcp.Who{}, auth.ErrUnauthenticated
		}
		actor, _ := extra.TokenInfo.Extra["actor"].(string)
		role, _ := extra.TokenInfo.Extra["role"].(string)
		return mcp.Who{Tenant: tenant, Actor: actor, Person: role == auth.RolePerson}, nil
	}
	cfg.ArgumentsMax = int(s.cfg.BodyMax)
	cfg.Hold = s.withSessionHolds
	cfg.Changes = func(ctx context.Context, tenant, session string) (<-chan struct{}, error) {
		return s.feed.Changes(ctx, service.Call{Tenant: tenant, Session: session})
	}
	cfg.Now = func() time.Time { return s.cfg.Ledger.Now() }
	cfg.Logger = s.cfg.Logger
	if s.replicated {
		// A cluster node's write can end with its outcome unknown: the
		// tools key and retry it themselves, as the client does.
		cfg.Retry = &service.Retry{}
	}
	return mcp.New(cfg)
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}
