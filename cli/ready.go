package cli

// tally ready: what a seat can take now, the way `bd ready` answers it for
// beads users: pool claims whose dependencies hold and the promises it owes
// that wait on no antecedent, by priority and then deadline.

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"tally/instant"
	"tally/priority"
	"tally/promise"
	"tally/service"
)

func addReadyCommands(root *cobra.Command, g *global) { root.AddCommand(newReady(g)) }

func newReady(g *global) *cobra.Command {
	var o readOptions
	c := &cobra.Command{
		Use:   "ready [--as SEAT]",
		Short: "What a seat can take now: pool claims whose dependencies hold, and promises it owes, by priority then deadline",
		Long: `tally ready lists what the acting seat (--as, $TALLY_ACTOR, or over TALLY_URL the token's identity)
can take now, each with the command that takes it:

  - claims posted and not yet taken that it may take: posted to a pool it sits in (claim create
    without --respondent, --pool naming the seats or none for any seat), or naming it as respondent,
    whose --depends-on claims are Satisfied and --awaits claims have ended;
  - promises it owes that wait on no antecedent (not conditional).

They are ordered by priority (0 highest to 4; default 2: claim create --priority, promise
--priority, which a promise keeps in its meta as "priority"), then by deadline (none last).
The first seat to acquire a pool claim's receipt becomes its respondent; another is refused.`,
		Example: `  tally ready --as worker-1
  TALLY_ACTOR=worker-1 tally ready --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			who, err := g.requireActor("")
			if err != nil {
				return err
			}
			svc, call, err := g.reader(o)
			if err != nil {
				return err
			}
			call.Actor = who
			res, err := svc.Ready(c.Context(), call, who)
			if err != nil {
				return err
			}
			return g.printDoc(res.Doc, func(w io.Writer) error { return g.printReady(w, res, call) })
		},
	}
	o.bind(c)
	return c
}

// printReady prints a ready list for people. Each command carries
// --session when it is not the default, and --as when the identity came
// from --as rather than the environment (TALLY_ACTOR, a token), so that it
// runs as printed in the shell that ran tally ready.
func (g *global) printReady(w io.Writer, res service.ReadyList, call service.Call) error {
	if len(res.Items) == 0 {
		fmt.Fprintf(w, "%s has nothing ready to take (as of %s).\n", res.Seat, instant.Format(res.Now))
		return nil
	}
	fmt.Fprintf(w, "%s can take %d now (as of %s), highest priority first:\n", res.Seat, len(res.Items), instant.Format(res.Now))
	as := ""
	if g.as != "" {
		as = res.Seat
	}
	for _, it := range res.Items {
		var about []string
		if it.Deadline != "" {
			about = append(about, map[string]string{"claim": "deadline ", "promise": "until "}[it.Kind]+it.Deadline)
		}
		if it.Overdue {
			about = append(about, "overdue")
		}
		if it.Pooled {
			pool := "any seat"
			if len(it.Pool) > 0 {
				pool = strings.Join(it.Pool, ", ")
			}
			about = append(about, "pool: "+pool)
		}
		from := map[string]string{"claim": "from", "promise": "to"}[it.Kind]
		line := fmt.Sprintf("P%d %s %s %s %s: %s", it.Priority, it.Kind, it.ID, from, it.From, clip(it.Text, 100))
		if len(about) > 0 {
			line += " (" + strings.Join(about, "; ") + ")"
		}
		fmt.Fprintln(w, line)
		fmt.Fprintln(w, "   "+service.ShellCommand(it.Take, call.Tenant, call.Session, as))
	}
	return nil
}

// priorityValue is a --priority flag: 0 (highest) to 4, nil unless given.
type priorityValue struct{ p **int }

func priorityFlag(f *pflag.FlagSet, p **int) {
	f.Var(priorityValue{p}, "priority", "0 (highest) to 4, as beads counts; default 2")
}

func (v priorityValue) String() string {
	if *v.p == nil {
		return ""
	}
	return strconv.Itoa(**v.p)
}

func (v priorityValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(s), "P"))
	if err != nil || n < 0 || n > priority.Max {
		return fmt.Errorf("priority: must be an integer from 0 (highest) to %d, not %q", priority.Max, s)
	}
	*v.p = &n
	return nil
}

func (priorityValue) Type() string { return "0-4" }

// declarePriority records a declaration's --priority in its meta, where a
// promise keeps it (promise.WithPriority).
func declarePriority(meta string, p *int) (string, error) {
	if p == nil {
		return meta, nil
	}
	return promise.WithPriority(meta, *p)
}
