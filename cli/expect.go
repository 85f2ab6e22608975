package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/auth"
	"tally/expect"
	"tally/instant"
	"tally/service"
)

// addExpectCommands adds the expectations family's verbs and the timekeeper.
func addExpectCommands(root *cobra.Command, g *global) {
	ex := &cobra.Command{
		Use:   "expect",
		Short: "State what you expect by when; the watcher records the absences (raise, show, ls, withdraw, supersede)",
	}
	ex.AddCommand(newExpectRaise(g), newExpectShow(g), newExpectLs(g), newExpectWithdraw(g), newExpectSupersede(g))
	task := &cobra.Command{Use: "task", Short: "Record an origin task's outcome"}
	task.AddCommand(newTaskOutcome(g))
	root.AddCommand(ex, newFact(g), task, newLapses(g), newWatch(g))
}

// expectWrite carries the flags of the expectation write verbs.
type expectWrite struct {
	human     bool
	requestID string
}

func (o *expectWrite) bind(c *cobra.Command) {
	c.Flags().BoolVar(&o.human, "human", false, "the acting identity is a person (may extend past the lineage bound, withdraw others' expectations); over TALLY_URL the token's role must be person")
	c.Flags().StringVar(&o.requestID, "request-id", "", "your id for this request: an exact retry prints the first answer and appends nothing")
}

// expectService is the service and the call an expectation write runs
// with: the acting identity, a person when --human, and the request id.
// Over TALLY_URL a person is a person-role token, so --human with another
// token is refused rather than quietly ignored (against a server run with
// --insecure-dev the role is sent with the request).
func (g *global) expectService(c *cobra.Command, o expectWrite) (cliService, service.Call, error) {
	svc, actor, err := g.writer()
	if err != nil {
		return nil, service.Call{}, err
	}
	if o.human && g.rest != nil && g.io.Getenv("TALLY_TOKEN") != "" {
		if id, err := g.identity(c.Context()); err != nil {
			return nil, service.Call{}, err
		} else if id.Role != auth.RolePerson {
			return nil, service.Call{}, usagef("human: over TALLY_URL a person is a token with role person, and this token acts as %s with role %s; use a person-role token (tally token create --role person) or leave out --human", id.Actor, id.Role)
		}
	}
	call, err := g.call(actor, o.requestID, time.Time{})
	call.Person = o.human
	return svc, call, err
}

// printDoc prints a verb's answer: its document with --json, else what
// human prints.
func (g *global) printDoc(doc service.Doc, human func(w io.Writer) error) error {
	if g.json {
		_, err := g.io.Out.Write(doc.JSON)
		return err
	}
	return human(g.io.Out)
}

// bindRaise binds the flags that state an expectation.
func bindRaise(c *cobra.Command, in *raiseInput) {
	f := c.Flags()
	f.StringVar(&in.id, "id", "", "the expectation's id (at most 128 characters, no whitespace); default: minted exp_xxxxxxxxxxxx")
	f.StringVar(&in.kind, "kind", "", "what kind of step it is (shipment.arrival)")
	f.StringVar(&in.subject, "subject", "", "what it is about, as TYPE:ID (shipment:PA-2026-0901)")
	f.StringVar(&in.expects, "expects", "", "what is expected, in words")
	f.StringVar(&in.factKey, "fact-key", "", "the exact fact key that satisfies it (shipment.arrived:PA-2026-0901)")
	f.StringVar(&in.due, "due", "", "when it is due: RFC 3339 or a duration from now (required)")
	f.StringVar(&in.grace, "grace", "", "how long after due before it is overdue (PT6H or 6h)")
	f.StringVar(&in.anchor, "anchor", "", "ID:OFFSET: once ID is satisfied at T, the current due becomes T+OFFSET")
	f.StringArrayVar(&in.after, "after", nil, "an earlier step on the same subject this one follows (repeatable)")
	f.StringVar(&in.horizon, "horizon", "", "stalled if no fact at all arrives on the subject by then: RFC 3339 or a duration from now")
	f.StringVar(&in.basis, "basis", "", "where the due time comes from: observed, contract or declared (required, truthfully)")
	f.StringVar(&in.task, "task", "", "the origin task: when it is cancelled or fails, the expectation is withdrawn")
	f.StringVar(&in.context, "context", "", "the origin task's context")
	f.StringVar(&in.producer, "producer", "", "the seat expected to produce the satisfying fact: its tally prime lists the expectation")
}

func newExpectRaise(g *global) *cobra.Command {
	in := &raiseInput{}
	var o expectWrite
	c := &cobra.Command{
		Use:   "raise [-]",
		Short: "Raise an expectation (flags, or one JSON document on stdin with -)",
		Example: `  tally expect raise --id exp-depart --kind shipment.departure --subject shipment:PA-2026-0901 \
      --fact-key shipment.departed:PA-2026-0901 --due 2026-09-11T03:15:00Z --grace 2h --basis observed --task task-7
  tally expect raise --id exp-arrive --kind shipment.arrival --subject shipment:PA-2026-0901 \
      --fact-key shipment.arrived:PA-2026-0901 --due 2026-09-11T05:00:00Z --grace PT6H \
      --anchor exp-depart:1h45m --after exp-depart --horizon 2026-09-13T05:00:00Z --basis observed
  echo '{"expectationId":"exp-1","kind":"k","subject":{"type":"t","id":"1"},"satisfiedBy":{"factKey":"f"},"dueAt":"2026-09-11T05:00:00Z","basis":"declared"}' | tally expect raise -`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 1 {
				var err error
				if in, err = g.raiseFrom(c, args[0], in, "raise takes no argument but - (one JSON expectation on stdin)"); err != nil {
					return err
				}
			}
			if in.supersedes != "" {
				return usagef("supersedes: extend an expectation with `tally expect supersede`")
			}
			d, err := in.doc(g.io.Now(), false)
			if err != nil {
				return err
			}
			svc, call, err := g.expectService(c, o)
			if err != nil {
				return err
			}
			return g.printRaised(svc.RaiseExpectation(c.Context(), call, d))
		},
	}
	bindRaise(c, in)
	o.bind(c)
	return c
}

// raiseFrom reads the expectation document on stdin when arg is -, the
// flags given overriding its members; any other argument is refused with
// usage.
func (g *global) raiseFrom(c *cobra.Command, arg string, flags *raiseInput, usage string) (*raiseInput, error) {
	if arg != "-" {
		return nil, usagef("%s", usage)
	}
	var doc raiseInput
	if err := readRaiseDoc(g.io.In, &doc); err != nil {
		return nil, err
	}
	overrideChanged(c, &doc, flags)
	return &doc, nil
}

// printRaised prints a raise's or an extension's answer: the id raised.
func (g *global) printRaised(w service.ExpectationWritten, err error) error {
	if err != nil {
		return err
	}
	return g.printDoc(w.Doc, func(out io.Writer) error { return printLine(out, w.Expectation.ExpectationID) })
}

// overrideChanged copies into doc every raise flag given on the command line.
func overrideChanged(c *cobra.Command, doc, flags *raiseInput) {
	f := c.Flags()
	for name, pair := range map[string][2]*string{
		"id": {&doc.id, &flags.id}, "kind": {&doc.kind, &flags.kind}, "subject": {&doc.subject, &flags.subject},
		"expects": {&doc.expects, &flags.expects}, "fact-key": {&doc.factKey, &flags.factKey}, "due": {&doc.due, &flags.due},
		"grace": {&doc.grace, &flags.grace}, "anchor": {&doc.anchor, &flags.anchor}, "horizon": {&doc.horizon, &flags.horizon},
		"basis": {&doc.basis, &flags.basis}, "task": {&doc.task, &flags.task}, "context": {&doc.context, &flags.context},
	} {
		if f.Changed(name) {
			*pair[0] = *pair[1]
		}
	}
	if f.Changed("after") {
		doc.after, doc.afterSet = flags.after, true
	}
}

func newExpectSupersede(g *global) *cobra.Command {
	in := &raiseInput{}
	var o expectWrite
	c := &cobra.Command{
		Use:   "supersede OLD [-]",
		Short: "Give an open expectation more time: a new expectation that supersedes it (terms not given are inherited)",
		Long: "Raise a new expectation that supersedes OLD: the only way an expectation gets more time.\n" +
			"Terms not given are inherited from OLD; the new one must differ from every ancestor. A --due\n" +
			"given drops OLD's anchor (keep one with --anchor); an inherited horizon that has passed is\n" +
			"refused (pass --horizon).\n" +
			"Past the ledger's lineage bound only a person (--human; over TALLY_URL a person-role token) may extend.",
		Example: `  tally expect supersede exp-arrive --id exp-arrive-2 --due 2026-09-12T05:00:00Z --horizon 2026-09-14T05:00:00Z
  tally expect supersede exp-arrive-4 --id exp-arrive-5 --due 2026-09-15T05:00:00Z --human`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 2 {
				var err error
				if in, err = g.raiseFrom(c, args[1], in, "supersede takes OLD and optionally - (one JSON expectation on stdin)"); err != nil {
					return err
				}
			}
			if in.supersedes != "" && in.supersedes != args[0] {
				return usagef("supersedes: %q differs from OLD %q", in.supersedes, args[0])
			}
			// The terms not given are inherited by the expect core, from
			// its view of OLD.
			d, err := in.doc(g.io.Now(), true)
			if err != nil {
				return err
			}
			d.Supersedes = ""
			svc, call, err := g.expectService(c, o)
			if err != nil {
				return err
			}
			return g.printRaised(svc.SupersedeExpectation(c.Context(), call, args[0], d))
		},
	}
	bindRaise(c, in)
	// Every term is inherited from OLD here: none is required.
	f := c.Flags()
	f.Lookup("basis").Usage = "where the due time comes from: observed, contract or declared (default: OLD's, inherited)"
	f.Lookup("due").Usage = "when it is due: RFC 3339 or a duration from now (default: OLD's, inherited)"
	o.bind(c)
	return c
}

func newExpectShow(g *global) *cobra.Command {
	var nowFlag string
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show an expectation: state, projected, current and actual times, lapses, lineage",
		Example: "  tally expect show exp-arrive --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			now, err := parseNow(nowFlag, g.io.Now)
			if err != nil {
				return err
			}
			svc, call, err := g.actorReader(now)
			if err != nil {
				return err
			}
			v, err := svc.Expectation(c.Context(), call, args[0])
			if err != nil {
				return err
			}
			return g.printDoc(v.Doc, func(out io.Writer) error { return printExpectation(out, &v.Expectation, now) })
		},
	}
	bindExpectNow(c, &nowFlag)
	return c
}

// printLine prints s and a newline.
func printLine(w io.Writer, s string) error {
	_, err := fmt.Fprintln(w, s)
	return err
}

// printExpectation is expect show's human form at now: an open
// expectation past its due and grace with no lapse recorded says so (a
// view, as overdue is for promises: the timekeeper records the lapse).
func printExpectation(w io.Writer, v *expect.View, now time.Time) error {
	fmt.Fprintf(w, "%s  %s  (%s on %s, basis %s)\n", v.ExpectationID, v.State, v.Kind, v.Subject, v.Basis)
	if v.Expects != "" {
		fmt.Fprintf(w, "  expects:    %s\n", v.Expects)
	}
	fmt.Fprintf(w, "  satisfied by fact %s\n", v.SatisfiedBy.FactKey)
	fmt.Fprintf(w, "  raised by:  %s at %s\n", v.By, instant.Format(v.RaisedAt))
	if v.Producer != "" {
		fmt.Fprintf(w, "  producer:   %s\n", v.Producer)
	}
	fmt.Fprintf(w, "  projected:  %s\n", instant.Format(v.ProjectedDue))
	fmt.Fprintf(w, "  current:    %s", instant.Format(v.CurrentDue))
	if v.ReanchoredAt != nil {
		fmt.Fprintf(w, " (re-anchored on %s at %s)", v.Anchor.ExpectationID, instant.Format(*v.ReanchoredAt))
	}
	fmt.Fprintln(w)
	if v.ActualAt != nil {
		fmt.Fprintf(w, "  actual:     %s\n", instant.Format(*v.ActualAt))
	}
	if v.Grace != "" {
		fmt.Fprintf(w, "  grace:      %s\n", v.Grace)
	}
	if v.PastDue(now) {
		fmt.Fprintf(w, "  past due:   due passed %s (at %s), lapse not yet recorded\n", relative(v.DueBy(), now), instant.Format(v.DueBy()))
	}
	if v.Horizon != nil {
		fmt.Fprintf(w, "  horizon:    %s\n", instant.Format(*v.Horizon))
	}
	if v.Origin != nil {
		fmt.Fprintf(w, "  origin:     task %s %s\n", v.Origin.TaskID, v.Origin.ContextID)
	}
	if v.Withdrawn != nil {
		fmt.Fprintf(w, "  withdrawn:  by %s at %s: %s\n", v.Withdrawn.By, instant.Format(v.Withdrawn.At), v.Withdrawn.Reason)
	}
	if len(v.Lineage) > 1 {
		fmt.Fprintf(w, "  lineage:    %s\n", strings.Join(v.Lineage, " → "))
	}
	for _, l := range v.Lapses {
		fmt.Fprintf(w, "  lapse:      %s %s (due %s, lapsed %s, noticed %s)\n", l.LapseID, l.Lapse,
			instant.Format(l.DueAt), instant.Format(l.LapsedAt), instant.Format(l.NoticedAt))
	}
	return nil
}

func newExpectLs(g *global) *cobra.Command {
	var f expect.Filter
	var subject, nowFlag string
	c := &cobra.Command{
		Use:     "ls",
		Short:   "List expectations in the order they were raised",
		Example: "  tally expect ls --state open --subject shipment:PA-2026-0901",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			now, err := parseNow(nowFlag, g.io.Now)
			if err != nil {
				return err
			}
			if f.State != "" {
				if _, ok := expect.ParseLife(f.State); !ok {
					return usagef("state: %q must be open, satisfied, withdrawn or superseded", f.State)
				}
			}
			if subject != "" {
				s, err := parseSubject("subject", subject)
				if err != nil {
					return err
				}
				f.Subject = s
			}
			svc, call, err := g.actorReader(now)
			if err != nil {
				return err
			}
			vs, err := svc.ListExpectations(c.Context(), call, f)
			if err != nil {
				return err
			}
			return g.printDoc(vs.Doc, func(out io.Writer) error {
				t := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				for _, v := range vs.Expectations {
					state := v.State
					if v.PastDue(now) {
						state += " (due passed, lapse not yet recorded)"
					}
					fmt.Fprintf(t, "%s\t%s\t%s\t%s\tdue %s\t%d lapse(s)\n", v.ExpectationID, state, v.Kind, v.Subject, instant.Format(v.CurrentDue), len(v.Lapses))
				}
				return t.Flush()
			})
		},
	}
	c.Flags().StringVar(&f.State, "state", "", "only open, satisfied, withdrawn or superseded")
	c.Flags().StringVar(&f.Kind, "kind", "", "only this kind")
	c.Flags().StringVar(&subject, "subject", "", "only this subject (TYPE:ID)")
	c.Flags().StringVar(&f.TaskID, "task", "", "only those raised on this origin task")
	c.Flags().StringVar(&f.ContextID, "context", "", "only those raised in this context")
	bindExpectNow(c, &nowFlag)
	return c
}

func newExpectWithdraw(g *global) *cobra.Command {
	var o expectWrite
	var reason string
	c := &cobra.Command{
		Use:     "withdraw ID [--reason TEXT]",
		Short:   "Withdraw an open expectation (its raiser or a person); no lapse is recorded for it afterwards",
		Example: `  tally expect withdraw exp-arrive --reason "shipment rerouted"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			svc, call, err := g.expectService(c, o)
			if err != nil {
				return err
			}
			w, err := svc.WithdrawExpectation(c.Context(), call, args[0], api.ExpectWithdraw{Reason: reason})
			if err != nil {
				return err
			}
			return g.printDoc(w.Doc, func(out io.Writer) error { return printLine(out, args[0]+": withdrawn") })
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why")
	o.bind(c)
	return c
}

func newFact(g *global) *cobra.Command {
	var o expectWrite
	var subject, at string
	c := &cobra.Command{
		Use:     "fact KEY --subject TYPE:ID [--at TIME]",
		Short:   "Record that KEY was observed on a subject; an expectation with that exact fact key is satisfied",
		Example: `  tally fact shipment.departed:PA-2026-0901 --subject shipment:PA-2026-0901 --at 2026-09-11T04:00:00Z --as carrier-feed`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if subject == "" {
				return usagef("subject: required (--subject TYPE:ID)")
			}
			s, err := parseSubject("subject", subject)
			if err != nil {
				return err
			}
			if at != "" {
				if _, err := instant.Parse("at", at); err != nil {
					return err
				}
			}
			svc, call, err := g.expectService(c, o)
			if err != nil {
				return err
			}
			f, err := svc.RecordFact(c.Context(), call, api.ExpectFact{FactKey: args[0], Subject: &s, At: at})
			if err != nil {
				return err
			}
			return g.printDoc(f.Doc, func(out io.Writer) error { return printFact(out, f.Fact, f.Satisfied) })
		},
	}
	c.Flags().StringVar(&subject, "subject", "", "the subject observed, as TYPE:ID")
	c.Flags().StringVar(&at, "at", "", "when it happened, RFC 3339 (default: now; never in the future)")
	o.bind(c)
	return c
}

func printFact(w io.Writer, fv service.Fact, satisfied []string) error {
	fmt.Fprintf(w, "fact %s on %s at %s", fv.FactKey, fv.Subject, instant.Format(fv.At))
	if len(satisfied) > 0 {
		fmt.Fprintf(w, ": satisfied %s", strings.Join(satisfied, ", "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func newTaskOutcome(g *global) *cobra.Command {
	var o expectWrite
	var completed, cancelled, failed bool
	c := &cobra.Command{
		Use:     "outcome TASK (--completed | --cancelled | --failed)",
		Short:   "Record an origin task's outcome; cancelled or failed withdraws its open expectations",
		Example: "  tally task outcome task-7 --cancelled",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var outcome expect.Outcome
			n := 0
			for _, x := range []struct {
				set bool
				o   expect.Outcome
			}{{completed, expect.OutcomeCompleted}, {cancelled, expect.OutcomeCancelled}, {failed, expect.OutcomeFailed}} {
				if x.set {
					n++
					outcome = x.o
				}
			}
			if n != 1 {
				return usagef("outcome: give exactly one of --completed, --cancelled, --failed")
			}
			svc, call, err := g.expectService(c, o)
			if err != nil {
				return err
			}
			r, err := svc.RecordTaskOutcome(c.Context(), call, args[0], api.ExpectTaskOutcome{Outcome: string(outcome)})
			if err != nil {
				return err
			}
			return g.printDoc(r.Doc, func(out io.Writer) error { return printOutcome(out, args[0], outcome, r.Withdrawn) })
		},
	}
	c.Flags().BoolVar(&completed, "completed", false, "the task completed")
	c.Flags().BoolVar(&cancelled, "cancelled", false, "the task was cancelled: its open expectations are withdrawn")
	c.Flags().BoolVar(&failed, "failed", false, "the task failed: its open expectations are withdrawn")
	o.bind(c)
	return c
}

func printOutcome(w io.Writer, task string, outcome expect.Outcome, withdrawn []string) error {
	fmt.Fprintf(w, "task %s %s", task, outcome)
	if len(withdrawn) > 0 {
		fmt.Fprintf(w, ": withdrew %s", strings.Join(withdrawn, ", "))
	}
	_, err := fmt.Fprintln(w)
	return err
}

func newLapses(g *global) *cobra.Command {
	var since, expectation, nowFlag string
	c := &cobra.Command{
		Use:     "lapses [--since TIME]",
		Short:   "List the lapses the timekeeper recorded, in log order",
		Example: "  tally lapses --since 2026-09-11T00:00:00Z --json\n  tally lapses --since 1h          # noticed in the last hour",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			now, err := parseNow(nowFlag, g.io.Now)
			if err != nil {
				return err
			}
			var t time.Time
			if since != "" {
				if t, err = parseSince("since", since, now); err != nil {
					return err
				}
			}
			svc, call, err := g.actorReader(now)
			if err != nil {
				return err
			}
			ls, err := svc.Lapses(c.Context(), call, service.LapseFilter{Since: t, ExpectationID: expectation})
			if err != nil {
				return err
			}
			return g.printDoc(ls.Doc, func(out io.Writer) error {
				t := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				for _, x := range ls.Lapses {
					fmt.Fprintf(t, "%s\t%s\t%s\tdue %s\tlapsed %s\tnoticed %s\n", x.LapseID, x.ExpectationID, x.Lapse,
						instant.Format(x.DueAt), instant.Format(x.LapsedAt), instant.Format(x.NoticedAt))
				}
				return t.Flush()
			})
		},
	}
	c.Flags().StringVar(&since, "since", "", "only lapses noticed at or after this time: RFC 3339, or a duration back from --now (1h: the last hour)")
	c.Flags().StringVar(&expectation, "expectation", "", "only the lapses of this expectation")
	bindExpectNow(c, &nowFlag)
	return c
}

// bindExpectNow gives an expectation read verb --now, as the promise read
// verbs have it. A lapse is a recorded fact, committed by the timekeeper;
// --now is the instant an open expectation past its due and grace is shown
// as such (with no lapse recorded yet), and the clock that relative times
// such as `lapses --since 1h` count back from.
func bindExpectNow(c *cobra.Command, now *string) {
	c.Flags().StringVar(now, "now", "", "read at this RFC 3339 time instead of the clock (relative times count back from it)")
}
