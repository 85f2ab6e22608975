package servecli

// tally mcp: the ledger's verbs as MCP tools over stdio, for an agent host
// that launches it. Locally it acts as TALLY_ACTOR (or --as) on the ledger
// directory; with TALLY_URL it acts as the token's identity through the
// server, the same Service every verb uses.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"tally/auth"
	"tally/cli"
	"tally/mcp"
	"tally/service"
)

func newMCP(g cli.Env) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: cli.HostedShort("mcp"),
		Long: `tally mcp speaks the Model Context Protocol on stdin and stdout: each verb is a tool
(tally_promise_declare, tally_promise_amend, …) whose arguments are the verb's document plus
"session" and "request_id"; what a seat owes is the resource tally://owed/{seat}; the prompt
resume_seat lists what the seat owes, overdue first. A refused call is a tool error whose text
is the error document --json prints; nothing is recorded for it.

Locally the tools act as $TALLY_ACTOR (or --as) on the ledger directory (--dir, $TALLY_DIR,
or the nearest .tally/); with TALLY_URL and TALLY_TOKEN they act as the token's identity
through that server. --session sets the session a call that names none acts in.
Logs go to stderr. It stops when stdin closes. See docs/AGENTS.md for a host's configuration.`,
		Example: `  TALLY_ACTOR=reviewer tally mcp
  TALLY_URL=http://127.0.0.1:7420 TALLY_TOKEN=… tally mcp`,
		Args: cobra.NoArgs,
		// It runs with TALLY_URL too (through the client), which the root's
		// guard refuses for a verb it does not know to be remote.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if g.RemoteURL() != "" && g.Dir() != "" {
				return cli.Usagef("dir: --dir names a local ledger but TALLY_URL is set; give one of them")
			}
			return nil
		},
		RunE: func(c *cobra.Command, _ []string) error { return runMCP(g, c.Context()) },
	}
}

func runMCP(g cli.Env, ctx context.Context) error {
	svc, err := g.Service()
	if err != nil {
		return err
	}
	tenant, session, err := g.Target()
	if err != nil {
		return err
	}
	who := mcp.Who{Actor: g.Actor()}
	var changes func(ctx context.Context, tenant, session string) (<-chan struct{}, error)
	if g.RemoteURL() != "" {
		id, err := g.Identity(ctx)
		if err != nil {
			return err
		}
		who = mcp.Who{Tenant: id.Tenant, Actor: id.Actor, Person: id.Role == auth.RolePerson}
	} else {
		if who.Actor == "" {
			return cli.Usagef("actor: required: set TALLY_ACTOR (or pass --as) to the identity the tools act as")
		}
		if _, err := g.LedgerRoot(); err != nil {
			return err
		}
		// A subscribed resource hears this process's commits at once and
		// other processes' within a poll (ledgerservice.FeedPollDefault),
		// through the Service's change feed.
		feed, ok := svc.(service.Feed)
		if !ok {
			return fmt.Errorf("mcp: the local Service has no change feed")
		}
		changes = func(ctx context.Context, tenant, session string) (<-chan struct{}, error) {
			return feed.Changes(ctx, service.Call{Tenant: tenant, Session: session})
		}
	}
	cfg := mcp.DefaultConfig()
	cfg.Service = svc
	cfg.Identify = func(context.Context, *sdk.RequestExtra) (mcp.Who, error) { return who, nil }
	cfg.Tenant, cfg.Session = tenant, session
	cfg.Changes = changes
	// The host that launched it is on this machine: a tool may read the
	// bytes of an artifact or of evidence from a file it names.
	cfg.ReadPaths = true
	cfg.Now = g.IO().Now
	cfg.Version = cli.Version
	cfg.Logger = slog.New(slog.NewTextHandler(g.IO().Err, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := mcp.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	err = srv.Run(ctx, &sdk.IOTransport{Reader: io.NopCloser(g.IO().In), Writer: nopWriteCloser{g.IO().Out}})
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("stdin: closed in the middle of a message, which was not run")
	case err == nil || errors.Is(err, io.EOF) || errors.Is(err, sdk.ErrConnectionClosed) || errors.Is(err, context.Canceled):
		return nil // the host closed stdin: the session is over
	}
	return err
}

// nopWriteCloser leaves stdout open when the session ends.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
