// Package servecli holds the verbs that run a server or act on a cluster
// node: serve, mcp, cluster, backup and restore. They link the HTTP server,
// raft, pebble, MCP and Prometheus, so they live in the binary tally-server
// (the whole CLI), and the binary tally runs them through it: every other
// verb starts without paying for those packages (see cli/hosted.go).
package servecli

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/ledger"
	"tally/server"
	"tally/sessionname"
	"tally/store"
	"tally/timekeeper"
)

func newServe(g cli.Env) *cobra.Command {
	var addr, webhook, defaultSession string
	var insecure bool
	var lapseHosts []string
	var watchEvery, requestHistory time.Duration
	var lineageMax int
	var sessionsOpen, tenantSessions int
	var headerTimeout, bodyTimeout, idleTimeout time.Duration
	var maxArtifact, scrubRate string
	var scrubEvery, collectGrace, collectEvery time.Duration
	var cf clusterFlags
	c := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7420]",
		Short: cli.HostedShort("serve"),
		Long: "serve runs the ledger as a service on the embedded store: many tenant/session logs in one\n" +
			"process, bearer tokens (tally token create) mapped to identities, idempotent writes\n" +
			"(Idempotency-Key), Server-Sent Events, Prometheus /metrics, and /v1/openapi.json.",
		Example: "  tally serve --dir /var/lib/tally --addr 127.0.0.1:7420",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := cf.prepare(g, c, &addr); err != nil {
				return err
			}
			root, err := g.Root()
			if err != nil {
				return err
			}
			cfg := server.DefaultConfig()
			cfg.Addr, cfg.Root, cfg.Insecure = addr, g.Abs(root), insecure
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
					return cli.Usagef("lineage-max: must be at least 1")
				}
				cfg.Ledger.LineageMax = lineageMax
			}
			if c.Flags().Changed("request-history") {
				if requestHistory <= 0 {
					return cli.Usagef("request-history: must be a positive duration such as 24h")
				}
				cfg.Ledger.IdempotencyWindow = requestHistory
			}
			cfg.Logger = slog.New(slog.NewJSONHandler(g.IO().Err, nil))
			cfg.A2A.DefaultSession, cfg.A2A.LapseHosts = defaultSession, lapseHosts
			if err := cfg.A2A.Validate(); err != nil {
				return cli.Usagef("%v", err)
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
			cfg.Ledger.Now = g.IO().Now
			cfg.Ledger.Logger = cfg.Logger
			cfg.WatchEvery = watchEvery
			if sessionsOpen < 1 || tenantSessions < 1 {
				return cli.Usagef("sessions-open, tenant-sessions: must be at least 1")
			}
			cfg.SessionsOpen, cfg.TenantSessionsMax = sessionsOpen, tenantSessions
			if headerTimeout <= 0 || bodyTimeout <= 0 || idleTimeout <= 0 {
				return cli.Usagef("read-header-timeout, body-timeout, idle-timeout: must be positive durations such as 10s")
			}
			cfg.ReadHeaderTimeout, cfg.BodyTimeout, cfg.IdleTimeout = headerTimeout, bodyTimeout, idleTimeout
			if cfg.MaxArtifactBytes, err = parseByteSize(maxArtifact); err != nil || cfg.MaxArtifactBytes < 1 {
				return cli.Usagef("max-artifact-bytes: must be a size of at least 1 byte, such as 64MiB (got %q)", maxArtifact)
			}
			if cfg.ScrubRate, err = parseByteSize(strings.TrimSuffix(scrubRate, "/s")); err != nil {
				return cli.Usagef("scrub-rate: must be a size a second such as 16MiB/s, or 0 for no scrubbing (got %q)", scrubRate)
			}
			if scrubEvery < 0 || collectGrace < 0 || collectEvery < 0 {
				return cli.Usagef("scrub-every, collect-grace, collect-every: must not be negative")
			}
			cfg.ScrubEvery, cfg.CollectGrace, cfg.CollectEvery = scrubEvery, collectGrace, collectEvery
			if webhook != "" {
				cfg.Watch.Sinks = append(cfg.Watch.Sinks, &timekeeper.Webhook{URL: webhook, Attempts: 5, Backoff: 500 * time.Millisecond})
			}
			if insecure {
				fmt.Fprintln(g.IO().Err, "WARNING: --insecure-dev: no authentication; any client may act as any identity (X-Tally-Actor). Never expose this server.")
			}
			if g.IO().Getenv("GOGC") == "" {
				debug.SetGCPercent(100) // long-lived: the default trade-off
			}
			if cf.on {
				return serveCluster(g, c, cfg, &cf)
			}
			s, err := server.New(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return s.Serve(ctx, func(a string) {
				fmt.Fprintf(g.IO().Out, "tally serving %s on http://%s\n", cfg.Root, a)
			})
		},
	}
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:7420", "address to listen on")
	c.Flags().BoolVar(&insecure, "insecure-dev", false, "serve without authentication (development only; prints a warning)")
	c.Flags().DurationVar(&watchEvery, "watch-every", 10*time.Second, "how often the built-in timekeeper sweeps each open session (0: off)")
	c.Flags().StringSliceVar(&lapseHosts, "a2a-lapse-hosts", nil, "hosts lapses may be sent to over A2A (host, host:port or *.domain, comma-separated; default: any host but loopback, link-local and private addresses)")
	c.Flags().StringVar(&defaultSession, "a2a-default-session", sessionname.DefaultTenant+"/"+sessionname.DefaultSession, "the session (TENANT/SESSION) whose A2A agent the server's own card, /.well-known/agent-card.json, describes")
	c.Flags().IntVar(&sessionsOpen, "sessions-open", server.DefaultConfig().SessionsOpen, "sessions kept open at once; past it the least recently used idle ones are closed and reopened on demand")
	c.Flags().IntVar(&tenantSessions, "tenant-sessions", server.DefaultConfig().TenantSessionsMax, "sessions one tenant may hold; a write that would create one more is refused (429 SessionQuotaExceeded)")
	c.Flags().DurationVar(&headerTimeout, "read-header-timeout", server.DefaultConfig().ReadHeaderTimeout, "how long a client may take to send a request's headers")
	c.Flags().DurationVar(&bodyTimeout, "body-timeout", server.DefaultConfig().BodyTimeout, "how long a client may take to send a request's body; past it: 400 BodyIncomplete")
	c.Flags().DurationVar(&idleTimeout, "idle-timeout", server.DefaultConfig().IdleTimeout, "how long a kept-alive connection may wait for its next request")
	c.Flags().StringVar(&maxArtifact, "max-artifact-bytes", "1GiB", "the bytes one artifact or evidence upload may hold (bytes, or with a unit: 64MiB); past it: 413 ArtifactTooLarge, nothing kept")
	c.Flags().StringVar(&scrubRate, "scrub-rate", "16MiB/s", "how fast stored artifacts are re-read to find damaged copies (a size a second; 0: no scrubbing)")
	c.Flags().DurationVar(&scrubEvery, "scrub-every", server.DefaultScrubEvery, "the wait from the start of one scrub of the whole content store to the next")
	c.Flags().DurationVar(&collectGrace, "collect-grace", server.DefaultCollectGrace, "how long bytes no record references (a refused publish's, an upload cut off) are kept after their last upload")
	c.Flags().DurationVar(&collectEvery, "collect-every", server.DefaultCollectEvery, "how often the content store is collected (0: never)")
	c.Flags().StringVar(&webhook, "webhook", "", "deliver lapses and promise notices by HTTP POST to URL (retried, with Idempotency-Key)")
	c.Flags().IntVar(&lineageMax, "lineage-max", ledger.DefaultConfig().LineageMax, "expectations a lineage may hold before only a person extends it (default: the ledger's lineage_max, else 3)")
	cf.register(c)
	c.Flags().DurationVar(&requestHistory, "request-history", ledger.DefaultConfig().IdempotencyWindow, "how long a request id's answer is kept; an older retry gets 410 RequestHistoryExpired (default: the ledger's request_history, else 24h)")
	return c
}
