package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/expect"
	"tally/instant"
	"tally/ledger"
	"tally/rule"
)

// addExpectCommands adds the expectations family's verbs and the watcher.
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

// submitExpect opens the ledger, submits cmd and prints answer from the
// state the write left (see g.write). build, when set, completes the
// command from the state just before it is submitted (the core decides it
// again under the log's lock).
func (g *global) submitExpect(c *cobra.Command, cmd expect.Command, o expectWrite, build func(*ledger.State) (expect.Command, error), answer answerFunc) error {
	actor, err := g.requireActor("")
	if err != nil {
		return err
	}
	l, err := g.open()
	if err != nil {
		return err
	}
	defer l.Close()
	if build != nil {
		var berr error
		l.Read(func(st *ledger.State) { cmd, berr = build(st) })
		if berr != nil {
			return berr
		}
	}
	_, err = g.write(c, l, ledger.Command{Expect: cmd, Human: o.human}, actor, o.requestID, nil, answer)
	return err
}

func firstSeq(res []ledger.Result) uint64 {
	if len(res) == 0 {
		return 0
	}
	return res[0].Seq
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
				if args[0] != "-" {
					return usagef("raise takes no argument but - (one JSON expectation on stdin)")
				}
				var doc raiseInput
				if err := readRaiseDoc(g.io.In, &doc); err != nil {
					return err
				}
				overrideChanged(c, &doc, in)
				in = &doc
			}
			if in.supersedes != "" {
				return usagef("supersedes: extend an expectation with `tally expect supersede`")
			}
			r, err := in.raise(g.io.Now())
			if err != nil {
				return err
			}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				return g.raiseRemote(c, rc, r, o, "expectations")
			}
			return g.raiseAndPrint(c, expect.RaiseCommand{Raise: r}, r.ExpectationID, o, nil)
		},
	}
	bindRaise(c, in)
	o.bind(c)
	return c
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

func (g *global) raiseAndPrint(c *cobra.Command, cmd expect.Command, id string, o expectWrite, build func(*ledger.State) (expect.Command, error)) error {
	return g.submitExpect(c, cmd, o, build, func(g *global, st *ledger.State, res []ledger.Result) error {
		if g.json {
			v, _ := st.Expects.Expectation(id)
			return writeExpectDoc(g.io.Out, "seq", firstSeq(res), "expectation", v)
		}
		fmt.Fprintln(g.io.Out, id)
		return nil
	})
}

// raiseRemote raises or extends r over HTTP and prints what raiseAndPrint
// prints.
func (g *global) raiseRemote(c *cobra.Command, rc *client, r expect.Raise, o expectWrite, segs ...string) error {
	return g.expectWriteRemote(c, rc, o, func(map[string]json.RawMessage) error {
		fmt.Fprintln(g.io.Out, r.ExpectationID)
		return nil
	}, raiseBody(r), segs...)
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
				if args[1] != "-" {
					return usagef("supersede takes OLD and optionally - (one JSON expectation on stdin)")
				}
				var doc raiseInput
				if err := readRaiseDoc(g.io.In, &doc); err != nil {
					return err
				}
				overrideChanged(c, &doc, in)
				in = &doc
			}
			if in.supersedes != "" && in.supersedes != args[0] {
				return usagef("supersedes: %q differs from OLD %q", in.supersedes, args[0])
			}
			in.supersedes = args[0]
			if in.id == "" {
				in.id = api.MintExpectationID()
			}
			// The terms not given are inherited by the expect core, from
			// the ledger's (or the server's) view of OLD.
			cmd, err := in.supersede(g.io.Now())
			if err != nil {
				return err
			}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				return g.expectWriteRemote(c, rc, o, func(map[string]json.RawMessage) error {
					fmt.Fprintln(g.io.Out, cmd.Raise.ExpectationID)
					return nil
				}, supersedeBody(cmd), "expectations", args[0], "supersede")
			}
			return g.raiseAndPrint(c, cmd, in.id, o, nil)
		},
	}
	bindRaise(c, in)
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
			if _, err := parseNow(nowFlag, g.io.Now); err != nil {
				return err
			}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				var v expect.View
				if printed, err := g.expectGet(c, rc, nil, "expectation", &v, "expectations", args[0]); err != nil || printed {
					return err
				}
				printExpectation(g.io.Out, &v)
				return nil
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			var v expect.View
			var ok bool
			v, ok = l.Expectation(args[0])
			if !ok {
				return rule.NotFoundf("expectationId", "names no expectation in this ledger: "+args[0])
			}
			if g.json {
				return writeExpectDoc(g.io.Out, "expectation", v)
			}
			printExpectation(g.io.Out, &v)
			return nil
		},
	}
	bindExpectNow(c, &nowFlag)
	return c
}

func printExpectation(w io.Writer, v *expect.View) {
	fmt.Fprintf(w, "%s  %s  (%s on %s, basis %s)\n", v.ExpectationID, v.State, v.Kind, v.Subject, v.Basis)
	if v.Expects != "" {
		fmt.Fprintf(w, "  expects:    %s\n", v.Expects)
	}
	fmt.Fprintf(w, "  satisfied by fact %s\n", v.SatisfiedBy.FactKey)
	fmt.Fprintf(w, "  raised by:  %s at %s\n", v.By, instant.Format(v.RaisedAt))
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
			if _, err := parseNow(nowFlag, g.io.Now); err != nil {
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
			var vs []expect.View
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				q := url.Values{}
				for k, v := range map[string]string{"state": f.State, "kind": f.Kind, "subject": subject, "task": f.TaskID, "context": f.ContextID} {
					if v != "" {
						q.Set(k, v)
					}
				}
				if printed, err := g.expectGet(c, rc, q, "expectations", &vs, "expectations"); err != nil || printed {
					return err
				}
			} else {
				l, err := g.open()
				if err != nil {
					return err
				}
				defer l.Close()
				vs = l.Expectations(f)
				if g.json {
					return writeExpectDoc(g.io.Out, "expectations", vs)
				}
			}
			t := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
			for _, v := range vs {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\tdue %s\t%d lapse(s)\n", v.ExpectationID, v.State, v.Kind, v.Subject, instant.Format(v.CurrentDue), len(v.Lapses))
			}
			return t.Flush()
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
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				body := map[string]string{}
				if reason != "" {
					body["reason"] = reason
				}
				return g.expectWriteRemote(c, rc, o, func(map[string]json.RawMessage) error {
					fmt.Fprintf(g.io.Out, "%s: withdrawn\n", args[0])
					return nil
				}, body, "expectations", args[0], "withdraw")
			}
			return g.submitExpect(c, expect.WithdrawCommand{ExpectationID: args[0], Reason: reason}, o, nil, func(g *global, st *ledger.State, res []ledger.Result) error {
				if g.json {
					v, _ := st.Expects.Expectation(args[0])
					return writeExpectDoc(g.io.Out, "seq", firstSeq(res), "expectation", v)
				}
				fmt.Fprintf(g.io.Out, "%s: withdrawn\n", args[0])
				return nil
			})
		},
	}
	c.Flags().StringVar(&reason, "reason", "", "why")
	o.bind(c)
	return c
}

// factView is a fact as the fact verb prints it.
type factView struct {
	FactKey string         `json:"factKey"`
	Subject expect.Subject `json:"subject"`
	At      time.Time      `json:"at"`
	By      string         `json:"by"`
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
			cmd := expect.FactCommand{FactKey: args[0], Subject: s}
			if at != "" {
				t, err := instant.Parse("at", at)
				if err != nil {
					return err
				}
				cmd.At = t
			}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				body := map[string]any{"factKey": cmd.FactKey, "subject": cmd.Subject}
				if !cmd.At.IsZero() {
					body["at"] = instant.Format(cmd.At)
				}
				return g.expectWriteRemote(c, rc, o, func(m map[string]json.RawMessage) error {
					var fv factView
					var satisfied []string
					if err := decodeMember(m, "fact", &fv); err != nil {
						return err
					}
					if err := decodeMember(m, "satisfied", &satisfied); err != nil {
						return err
					}
					printFact(g.io.Out, fv, satisfied)
					return nil
				}, body, "facts")
			}
			var open []string
			build := func(st *ledger.State) (expect.Command, error) {
				for _, v := range st.Expects.List(expect.Filter{State: "open"}) {
					if v.SatisfiedBy.FactKey == args[0] {
						open = append(open, v.ExpectationID)
					}
				}
				return cmd, nil
			}
			return g.submitExpect(c, cmd, o, build, func(g *global, st *ledger.State, res []ledger.Result) error {
				satisfied := []string{}
				for _, id := range open {
					if v, ok := st.Expects.Expectation(id); ok && v.State == "satisfied" {
						satisfied = append(satisfied, id)
					}
				}
				var fv factView
				if ev, err := expect.Decode(res[0].Line); err == nil && ev.Fact != nil {
					fv = factView{FactKey: ev.Fact.FactKey, Subject: ev.Fact.Subject, At: ev.Fact.At, By: ev.Fact.By}
				}
				if g.json {
					return writeExpectDoc(g.io.Out, "seq", firstSeq(res), "fact", fv, "satisfied", satisfied)
				}
				printFact(g.io.Out, fv, satisfied)
				return nil
			})
		},
	}
	c.Flags().StringVar(&subject, "subject", "", "the subject observed, as TYPE:ID")
	c.Flags().StringVar(&at, "at", "", "when it happened, RFC 3339 (default: now; never in the future)")
	o.bind(c)
	return c
}

func printFact(w io.Writer, fv factView, satisfied []string) {
	fmt.Fprintf(w, "fact %s on %s at %s", fv.FactKey, fv.Subject, instant.Format(fv.At))
	if len(satisfied) > 0 {
		fmt.Fprintf(w, ": satisfied %s", strings.Join(satisfied, ", "))
	}
	fmt.Fprintln(w)
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
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				return g.expectWriteRemote(c, rc, o, func(m map[string]json.RawMessage) error {
					var withdrawn []string
					if err := decodeMember(m, "withdrawn", &withdrawn); err != nil {
						return err
					}
					printOutcome(g.io.Out, args[0], outcome, withdrawn)
					return nil
				}, map[string]string{"outcome": string(outcome)}, "tasks", args[0], "outcome")
			}
			return g.submitExpect(c, expect.TaskOutcomeCommand{TaskID: args[0], Outcome: outcome}, o, nil, func(g *global, _ *ledger.State, res []ledger.Result) error {
				withdrawn := []string{}
				for _, r := range res {
					if r.Type != expect.TypeWithdraw {
						continue
					}
					if ev, err := expect.Decode(r.Line); err == nil && ev.Withdraw != nil {
						withdrawn = append(withdrawn, ev.Withdraw.ExpectationID)
					}
				}
				if g.json {
					return writeExpectDoc(g.io.Out, "seq", firstSeq(res), "task", map[string]string{"taskId": args[0], "outcome": string(outcome)}, "withdrawn", withdrawn)
				}
				printOutcome(g.io.Out, args[0], outcome, withdrawn)
				return nil
			})
		},
	}
	c.Flags().BoolVar(&completed, "completed", false, "the task completed")
	c.Flags().BoolVar(&cancelled, "cancelled", false, "the task was cancelled: its open expectations are withdrawn")
	c.Flags().BoolVar(&failed, "failed", false, "the task failed: its open expectations are withdrawn")
	o.bind(c)
	return c
}

func printOutcome(w io.Writer, task string, outcome expect.Outcome, withdrawn []string) {
	fmt.Fprintf(w, "task %s %s", task, outcome)
	if len(withdrawn) > 0 {
		fmt.Fprintf(w, ": withdrew %s", strings.Join(withdrawn, ", "))
	}
	fmt.Fprintln(w)
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
			out := []expect.LapseView{}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				q := url.Values{}
				if !t.IsZero() {
					q.Set("since", instant.Format(t))
				}
				if expectation != "" {
					q.Set("expectation", expectation)
				}
				if printed, err := g.expectGet(c, rc, q, "lapses", &out, "lapses"); err != nil || printed {
					return err
				}
			} else {
				l, err := g.open()
				if err != nil {
					return err
				}
				defer l.Close()
				var ls []expect.LapseView
				ls = l.Lapses(t)
				for _, x := range ls {
					if expectation == "" || x.ExpectationID == expectation {
						out = append(out, x)
					}
				}
				if g.json {
					return writeExpectDoc(g.io.Out, "lapses", out)
				}
			}
			t2 := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
			for _, x := range out {
				fmt.Fprintf(t2, "%s\t%s\t%s\tdue %s\tlapsed %s\tnoticed %s\n", x.LapseID, x.ExpectationID, x.Lapse,
					instant.Format(x.DueAt), instant.Format(x.LapsedAt), instant.Format(x.NoticedAt))
			}
			return t2.Flush()
		},
	}
	c.Flags().StringVar(&since, "since", "", "only lapses noticed at or after this time: RFC 3339, or a duration back from --now (1h: the last hour)")
	c.Flags().StringVar(&expectation, "expectation", "", "only the lapses of this expectation")
	bindExpectNow(c, &nowFlag)
	return c
}

// bindExpectNow gives an expectation read verb --now, as the promise read
// verbs have it. Expectation views do not depend on the clock (a lapse is
// a recorded fact, committed by the timekeeper); --now is the clock that
// relative times such as `lapses --since 1h` count back from.
func bindExpectNow(c *cobra.Command, now *string) {
	c.Flags().StringVar(now, "now", "", "read at this RFC 3339 time instead of the clock (relative times count back from it)")
}
