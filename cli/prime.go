package cli

// tally prime: the start-of-session context of a seat, for the hook an
// agent host runs when a session starts (its stdout becomes the session's
// first context). The package prime reads and renders it, so tally mcp's
// tally_prime and resume_seat print the same bytes.

import (
	"context"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/prime"
	"tally/sessionname"
)

// primeOptions are prime's flags.
type primeOptions struct {
	now       string
	seat      string
	maxTokens int
}

func newPrime(g *global) *cobra.Command {
	o := primeOptions{}
	c := &cobra.Command{
		Use:   "prime [--seat WHO] [--max-tokens N] [--now TIME]",
		Short: "The start-of-session context of a seat: what it owes and is owed, the claims waiting on it, with the commands to act",
		Long: `tally prime prints what a seat (the acting identity, or --seat) must know when a session of it
starts: what it owes (overdue first, then by deadline), what is owed to it that is late, the
claims waiting on it (as respondent, evaluator or claimant, and failed ones not yet answered by
a successor), the expectations it raised that lapsed or are past due, and the facts expected of
it, each with its ids and the next command to act. Every command runs as printed: it carries
--session when the session is not the default and --as when the seat is not TALLY_ACTOR's (or
the token's). Wire it into an agent host's session-start hook (see docs/AGENTS.md). The output fits in --max-tokens (4 bytes a token):
the lowest-priority items are left out first, and it says how many and where to list them.
The same ledger and --now print the same bytes. tally owed --format prime prints the same.`,
		Example: `  tally prime --as reviewer
  TALLY_ACTOR=reviewer tally prime --max-tokens 800
  tally prime --seat author --now 2026-09-02T10:00:00Z --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return g.runPrime(c.Context(), o) },
	}
	f := c.Flags()
	f.StringVar(&o.seat, "seat", "", "the seat to prime (default: the acting identity, --as or $TALLY_ACTOR; over TALLY_URL the token's)")
	f.IntVar(&o.maxTokens, "max-tokens", prime.TokensDefault, "bound on the output, estimated at 4 bytes a token; the lowest-priority items are left out first")
	f.StringVar(&o.now, "now", "", "evaluate at this RFC 3339 time instead of the clock (output is then byte-for-byte reproducible)")
	return c
}

// addPrimeCommands adds tally prime.
func addPrimeCommands(root *cobra.Command, g *global) { root.AddCommand(newPrime(g)) }

func (g *global) runPrime(ctx context.Context, o primeOptions) error {
	if o.maxTokens < 1 {
		return usagef("max-tokens: must be a positive number of tokens (got %d)", o.maxTokens)
	}
	if o.seat != "" && strings.TrimSpace(o.seat) == "" {
		return usagef("seat: must not be blank")
	}
	now, err := parseNow(o.now, g.io.Now)
	if err != nil {
		return err
	}
	if o.now == "" {
		now = now.Truncate(time.Second) // people read it: whole seconds
	}
	seat := o.seat
	switch {
	case seat != "":
	case g.remoteURL() != "":
		// Over TALLY_URL the seat is the token's identity, as the server says.
		id, err := g.identity(ctx)
		if err != nil {
			return err
		}
		seat = id.Actor
	default:
		if seat = g.actor(); seat == "" {
			return usagef("seat: required: pass --seat WHO or --as WHO, or set TALLY_ACTOR")
		}
	}
	svc, call, err := g.serviceCall("", "", now)
	if err != nil {
		return err
	}
	cmds, err := g.commands(ctx, seat)
	if err != nil {
		return err
	}
	d, err := prime.Read(ctx, svc, call, seat)
	if err != nil {
		return err
	}
	p := prime.Build(seat, now, d, cmds)
	keep := p.Fit(o.maxTokens * prime.BytesPerToken)
	if g.json {
		_, err := g.io.Out.Write(p.JSON(keep, o.maxTokens))
		return err
	}
	_, err = io.WriteString(g.io.Out, p.Text(keep))
	return err
}

// commands is what the commands printed for seat carry so that they run
// as printed in a shell set up as docs/AGENTS.md says: --session when it
// is not the default, and --as unless the environment names seat
// (TALLY_ACTOR, or over TALLY_URL the token's identity).
func (g *global) commands(ctx context.Context, seat string) (prime.Commands, error) {
	var c prime.Commands
	tenant, session, err := g.target()
	if err != nil {
		return c, err
	}
	if tenant != sessionname.DefaultTenant || session != sessionname.DefaultSession {
		c.Session = tenant + "/" + session
	}
	env := g.io.Getenv("TALLY_ACTOR")
	if g.remoteURL() != "" && g.io.Getenv("TALLY_TOKEN") != "" {
		id, err := g.whoamiAs(ctx)
		if err != nil {
			return c, err
		}
		env = id.Actor
	}
	if seat != env {
		c.As = seat
	}
	return c, nil
}
