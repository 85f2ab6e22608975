package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tally/auth"
	restclient "tally/client"
	"tally/jsondoc"
	"tally/ledger"
	"tally/server"
	"tally/store"
	"tally/watch"
)

func newServe(g *global) *cobra.Command {
	var addr, webhook, defaultSession string
	var insecure bool
	var lapseHosts []string
	var watchEvery, requestHistory time.Duration
	var lineageMax int
	var sessionsOpen, tenantSessions int
	var headerTimeout, bodyTimeout, idleTimeout time.Duration
	var cf clusterFlags
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7420]",
		Short: "Serve the ledger over HTTP: JSON API, event stream, metrics",
		Long: "serve runs the ledger as a service on the embedded store: many tenant/session logs in one\n" +
			"process, bearer tokens (tally token create) mapped to identities, idempotent writes\n" +
			"(Idempotency-Key), Server-Sent Events, Prometheus /metrics, and /v1/openapi.json.",
		Example: "  tally serve --dir /var/lib/tally --addr 127.0.0.1:7420",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := cf.prepare(g, c, &addr); err != nil {
				return err
			}
			root, err := g.root()
			if err != nil {
				return err
			}
			cfg := server.DefaultConfig()
			cfg.Addr, cfg.Root, cfg.Insecure = addr, g.abs(root), insecure
			// The ledger directory's settings, then the flags given.
			if store.IsLedger(cfg.Root) {
				st, err := store.ReadSettings(cfg.Root)
				if err != nil {
					return err
				}
				if cfg.Ledger, err = cfg.Ledger.WithSettings(st); err != nil {
					return err
				}
			}
			if c.Flags().Changed("lineage-max") {
				if lineageMax < 1 {
					return usagef("lineage-max: must be at least 1")
				}
				cfg.Ledger.LineageMax = lineageMax
			}
			if c.Flags().Changed("request-history") {
				if requestHistory <= 0 {
					return usagef("request-history: must be a positive duration such as 24h")
				}
				cfg.Ledger.IdempotencyWindow = requestHistory
			}
			cfg.Logger = slog.New(slog.NewJSONHandler(g.io.Err, nil))
			cfg.A2A.DefaultSession, cfg.A2A.LapseHosts = defaultSession, lapseHosts
			if err := cfg.A2A.Validate(); err != nil {
				return usagef("%v", err)
			}
			// A directory that does not exist yet becomes a ledger, as init
			// would make it; one that exists and is not a ledger is refused
			// by server.New. A cluster node's replica makes its own, once
			// the node has started, so a refused start leaves nothing.
			if _, err := os.Stat(cfg.Root); errors.Is(err, fs.ErrNotExist) && !cf.on {
				if err := store.Init(cfg.Root); err != nil {
					return err
				}
				cfg.Logger.Info("created a ledger", "dir", cfg.Root, "format", store.FormatVersion)
			}
			cfg.Ledger.Now = g.io.Now
			cfg.Ledger.Logger = cfg.Logger
			cfg.WatchEvery = watchEvery
			if sessionsOpen < 1 || tenantSessions < 1 {
				return usagef("sessions-open, tenant-sessions: must be at least 1")
			}
			cfg.SessionsOpen, cfg.TenantSessionsMax = sessionsOpen, tenantSessions
			if headerTimeout <= 0 || bodyTimeout <= 0 || idleTimeout <= 0 {
				return usagef("read-header-timeout, body-timeout, idle-timeout: must be positive durations such as 10s")
			}
			cfg.ReadHeaderTimeout, cfg.BodyTimeout, cfg.IdleTimeout = headerTimeout, bodyTimeout, idleTimeout
			if webhook != "" {
				cfg.Watch.Sinks = append(cfg.Watch.Sinks, &watch.Webhook{URL: webhook, Attempts: 5, Backoff: 500 * time.Millisecond})
			}
			if insecure {
				fmt.Fprintln(g.io.Err, "WARNING: --insecure-dev: no authentication; any client may act as any identity (X-Tally-Actor). Never expose this server.")
			}
			if g.io.Getenv("GOGC") == "" {
				debug.SetGCPercent(100) // long-lived: the default trade-off
			}
			if cf.on {
				return g.serveCluster(c, cfg, &cf)
			}
			s, err := server.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return s.Serve(ctx, func(a string) {
				fmt.Fprintf(g.io.Out, "tally serving %s on http://%s\n", cfg.Root, a)
			})
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:7420", "address to listen on")
	c.Flags().BoolVar(&insecure, "insecure-dev", false, "serve without authentication (development only; prints a warning)")
	c.Flags().DurationVar(&watchEvery, "watch-every", 10*time.Second, "how often the built-in timekeeper sweeps each open session (0: off)")
	c.Flags().StringSliceVar(&lapseHosts, "a2a-lapse-hosts", nil, "hosts lapses may be sent to over A2A (host, host:port or *.domain, comma-separated; default: any host but loopback, link-local and private addresses)")
	c.Flags().StringVar(&defaultSession, "a2a-default-session", store.DefaultTenant+"/"+store.DefaultSession, "the session (TENANT/SESSION) whose A2A agent the server's own card, /.well-known/agent-card.json, describes")
	c.Flags().IntVar(&sessionsOpen, "sessions-open", server.DefaultConfig().SessionsOpen, "sessions kept open at once; past it the least recently used idle ones are closed and reopened on demand")
	c.Flags().IntVar(&tenantSessions, "tenant-sessions", server.DefaultConfig().TenantSessionsMax, "sessions one tenant may hold; a write that would create one more is refused (429 SessionQuotaExceeded)")
	c.Flags().DurationVar(&headerTimeout, "read-header-timeout", server.DefaultConfig().ReadHeaderTimeout, "how long a client may take to send a request's headers")
	c.Flags().DurationVar(&bodyTimeout, "body-timeout", server.DefaultConfig().BodyTimeout, "how long a client may take to send a request's body; past it: 400 BodyIncomplete")
	c.Flags().DurationVar(&idleTimeout, "idle-timeout", server.DefaultConfig().IdleTimeout, "how long a kept-alive connection may wait for its next request")
	c.Flags().StringVar(&webhook, "webhook", "", "deliver lapses and promise notices by HTTP POST to URL (retried, with Idempotency-Key)")
	c.Flags().IntVar(&lineageMax, "lineage-max", ledger.DefaultConfig().LineageMax, "expectations a lineage may hold before only a person extends it (default: the ledger's lineage_max, else 3)")
	cf.register(c)
	c.Flags().DurationVar(&requestHistory, "request-history", ledger.DefaultConfig().IdempotencyWindow, "how long a request id's answer is kept; an older retry gets 410 RequestHistoryExpired (default: the ledger's request_history, else 24h)")
	return c
}

func newToken(g *global) *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "Manage the bearer tokens the server accepts (here, or through TALLY_URL with an admin token)"}
	var tenant, participant, role string
	create := &cobra.Command{
		Use:     "create --tenant T --participant URI [--role agent|person|timekeeper|admin]",
		Short:   "Mint a token (printed once; only its hash is stored)",
		Example: "  tally token create --tenant acme --participant https://example.org/agents/reviewer",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			if err := auth.Check(tenant, participant, role); err != nil {
				return usageError{err}
			}
			secret, tok, err := k.CreateToken(c.Context(), tenant, participant, role, g.io.Now())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(jsondoc.TokenCreated(secret, tok))
				return err
			}
			fmt.Fprintln(g.io.Out, secret)
			fmt.Fprintf(g.io.Err, "token %s for %s in tenant %s (role %s); it is shown only now\n", tok.ID, tok.Participant, tok.Tenant, tok.Role)
			return nil
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant the token may act in (\"*\": an admin of every tenant's tokens)")
	create.Flags().StringVar(&participant, "participant", "", "the identity the token acts as")
	create.Flags().StringVar(&role, "role", auth.RoleAgent, "agent, person, timekeeper or admin")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token; the server refuses it from the next request (every cluster node, once it has applied the revocation)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			tok, err := k.RevokeToken(c.Context(), args[0], g.io.Now())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(jsondoc.TokenRevoked(tok))
				return err
			}
			fmt.Fprintf(g.io.Out, "revoked %s\n", args[0])
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (never their secrets); through a server, those the token administers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			toks, err := k.ListTokens(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(jsondoc.TokenList(toks))
				return err
			}
			t := newTable(g.io.Out)
			fmt.Fprintln(t, "ID\tTENANT\tPARTICIPANT\tROLE\tCREATED\tREVOKED")
			for _, k := range toks {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%v\n", k.ID, k.Tenant, k.Participant, k.Role, k.Created.Format("2006-01-02T15:04:05Z"), k.Revoked)
			}
			return t.Flush()
		},
	}
	c.AddCommand(create, revoke, ls)
	return c
}

// tokenKeeper is where the token verbs act: the server TALLY_URL names
// (TALLY_TOKEN an admin token), else the ledger directory's tokens file.
func (g *global) tokenKeeper() (auth.Keeper, error) {
	if u := g.remoteURL(); u != "" {
		c, err := restclient.New(restclient.Config{URL: u, Token: g.io.Getenv("TALLY_TOKEN")})
		if err != nil {
			return nil, usageError{err}
		}
		return c, nil
	}
	root, err := g.ledgerRoot()
	if err != nil {
		return nil, err
	}
	return auth.Open(root), nil
}
