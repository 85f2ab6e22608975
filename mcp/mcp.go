// Package mcp is tally over the Model Context Protocol: one more binding
// over service.Service. Each tool is a family's Service methods (its
// verbs) of one kind, read or write, chosen by the argument action; its
// input schema is the union of the verbs' api documents plus the call's
// context (action, session, request id or now), every member described
// and every closed set an enum (args.go). Its answer is the verb's
// document as text, and a refusal is a tool error carrying the error
// document the CLI's --json prints. The binding that serves it (stdio in
// `tally mcp`, streamable HTTP in `tally serve`) says who a call acts as;
// this package never authenticates.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/refuse"
	"tally/service"
	"tally/sessionname"
)

// Who is the identity a call acts as, as its binding authenticated it.
type Who struct {
	// Tenant is the only tenant the caller may name; "" lets it name any
	// (the owner of a local ledger directory).
	Tenant string
	Actor  string
	Person bool
}

// Config is what a server is made of. Start from DefaultConfig.
type Config struct {
	Service service.Service
	// Identify says who a request acts as. Over stdio it is fixed; over
	// HTTP it reads what the bearer-token middleware put in extra.
	Identify func(ctx context.Context, extra *sdk.RequestExtra) (Who, error)
	// Tenant and Session are where a call that names no session acts: the
	// caller's tenant when Who names one, else Tenant.
	Tenant, Session string
	// ArgumentsMax bounds a tool call's arguments, in bytes.
	ArgumentsMax int
	// Hold, when set, wraps every call: the server holds the sessions a
	// call opens until it ends, as it does for a REST request.
	Hold func(ctx context.Context) (context.Context, func())
	// Changes, when set, signals each commit to tenant/session until ctx
	// ends: what makes a subscribed resource send updates.
	Changes func(ctx context.Context, tenant, session string) (<-chan struct{}, error)
	// ReadPaths lets the tools that take bytes read them from a file the
	// caller names: for tally mcp over stdio, whose caller is on the same
	// machine; never over HTTP.
	ReadPaths bool
	// Retry, when set (a cluster node's MCP over HTTP, where a write's
	// outcome can be unknown), gives a write that names no request_id one
	// of the server's own and runs a call again after a retryable answer
	// (run).
	Retry *service.Retry
	// SubscriptionsMax bounds the resources one MCP session may subscribe to.
	SubscriptionsMax int
	// Now is the clock of the views a resource and the prompt show.
	Now     func() time.Time
	Logger  *slog.Logger
	Version string
}

// DefaultConfig is the configuration `tally mcp` and `tally serve` start from.
func DefaultConfig() Config {
	return Config{
		Tenant: sessionname.DefaultTenant, Session: sessionname.DefaultSession, ArgumentsMax: 1 << 20,
		SubscriptionsMax: 64, Now: time.Now, Logger: slog.New(slog.DiscardHandler), Version: "0",
	}
}

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	switch {
	case c.Service == nil:
		return errors.New("mcp config: Service is nil")
	case c.Identify == nil:
		return errors.New("mcp config: Identify is nil")
	case c.Tenant == "" || c.Session == "":
		return fmt.Errorf("mcp config: Tenant %q and Session %q must be set", c.Tenant, c.Session)
	case c.ArgumentsMax < 1024:
		return fmt.Errorf("mcp config: ArgumentsMax %d must be at least 1024", c.ArgumentsMax)
	case c.SubscriptionsMax < 1:
		return fmt.Errorf("mcp config: SubscriptionsMax %d must be at least 1", c.SubscriptionsMax)
	case c.Now == nil || c.Logger == nil:
		return errors.New("mcp config: Now and Logger must be set")
	}
	return nil
}

// Server is the MCP server of one Service.
type Server struct {
	cfg  Config
	mcp  *sdk.Server
	subs *subscriptions
}

// New returns the MCP server of cfg.Service, with every tool whose method
// the Service has, the resources and the prompt.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg}
	s.subs = newSubscriptions(s)
	s.mcp = sdk.NewServer(&sdk.Implementation{Name: "tally", Version: cfg.Version}, &sdk.ServerOptions{
		Instructions:       instructions,
		Logger:             cfg.Logger,
		Capabilities:       &sdk.ServerCapabilities{},
		SubscribeHandler:   s.subs.subscribe,
		UnsubscribeHandler: s.subs.unsubscribe,
	})
	for _, t := range append(tools(cfg.Service, cfg.ReadPaths, cfg.Now), s.primeTool()) {
		if err := s.addTool(t); err != nil {
			return nil, err
		}
	}
	s.addResources()
	s.addPrompts()
	return s, nil
}

// instructions is what a host tells its model about the server as a whole.
const instructions = "tally is a ledger of obligations between agents: promises, claims of work, expectations. " +
	"Each tool is a family's verbs, chosen by action; its description lists each as action(the members it requires). " +
	"A call acts as this server's identity; the answer is the verb's JSON document. " +
	"A refused call is a tool error whose text is the error document {\"error\":\"FIELD: RULE\",\"code\":...}: " +
	"fix what it names, nothing was recorded. Give request_id on a write to make a retry safe: " +
	"a retry with the same request_id and arguments answers what the first recorded, recording nothing. " +
	"Start with tally_prime (the prompt resume_seat is the same text), or read tally://owed/{seat}."

// MCP is the protocol server, for a transport to run.
func (s *Server) MCP() *sdk.Server { return s.mcp }

// Run serves one session over t (stdio in `tally mcp`) until ctx ends or
// the peer closes it.
func (s *Server) Run(ctx context.Context, t sdk.Transport) error {
	return s.mcp.Run(ctx, t)
}

// Close stops what the subscriptions watch.
func (s *Server) Close() { s.subs.close() }

// where is the tenant and session a call acts in: the session argument
// ("SESSION" in the caller's tenant, or "TENANT/SESSION"), else the default.
// A caller bound to a tenant that names another gets NotFound, as REST
// answers a foreign tenant's path: it learns nothing of what is there.
func (s *Server) where(who Who, arg string) (tenant, session string, err error) {
	tenant, session = s.cfg.Tenant, s.cfg.Session
	if who.Tenant != "" {
		tenant = who.Tenant
	}
	if arg != "" {
		if t, rest, ok := strings.Cut(arg, "/"); ok {
			if who.Tenant != "" && t != who.Tenant {
				return "", "", errNotFound
			}
			tenant, arg = t, rest
		}
		session = arg
	}
	for _, n := range [][2]string{{"tenant", tenant}, {"session", session}} {
		if err := sessionname.Check(n[0], n[1]); err != nil {
			// The argument is "session" whichever half is at fault.
			return "", "", refuse.Invalidf("session", strings.TrimPrefix(err.Error(), n[0]+": "))
		}
	}
	return tenant, session, nil
}
