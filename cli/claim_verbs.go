package cli

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/claim"
	"tally/refuse"
	"tally/service"
)

func newClaimCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "claim",
		Short: "Claims: what is owed, the evidence delivered, and the acceptance the ledger derives from it",
		Long: "A claim fixes what is owed (slots, checks, evaluators). The respondent takes the receipt, publishes\n" +
			"artifacts and closes a testament; designated evaluators report verdicts on exact artifacts; the ledger\n" +
			"derives Satisfied or the reason it cannot be. Every verb also reads its command as one JSON document on\n" +
			"stdin when given - as its argument.",
	}
	c.AddCommand(newClaimCreate(g), newClaimPost(g), newClaimShow(g), newClaimLs(g),
		newClaimEnd(g, "cancel"), newClaimEnd(g, "revoke"), newClaimSupersede(g), newClaimGraph(g))
	return c
}

// createDoc is `tally claim create -`'s document (api.ClaimCreate, and
// request_id) and the create flags.
type createDoc struct {
	api.ClaimCreate
	WithRequestID
}

func newClaimCreate(g *global) *cobra.Command {
	var d createDoc
	var slots, checks []string
	c := &cobra.Command{
		Use:   "create ID --respondent WHO --work TEXT --check SLOT/CHECK:validator=NAME@VERSION[,...] ... | create -",
		Short: "Issue a claim (you are its claimant); its terms never change afterwards",
		Long: "Issue a claim. Slots are the named outputs owed; each has checks run by designated evaluators.\n\n" +
			"  --slot NAME[:observe]          declare a slot (Required unless :observe); a --check declares its slot too\n" +
			"  --check SLOT/ID:KEY=VALUE,...  declare a check; keys:\n" +
			"      validator=NAME[@VERSION]   the validator (version default 1), required\n" +
			"      evaluator=WHO              who alone may run it (default: the claimant)\n" +
			"      mode=required|observe      default required\n" +
			"      phases=programmatic+quality  default programmatic; quality alone is an agentic-only check\n" +
			"      attempts=N                 runs allowed per handler on an error (default 1)\n" +
			"      fallbacks=NAME@V+NAME@V    validators tried after the attempts are used up\n\n" +
			"A successor (--predecessor C) declaring no slots inherits C's slots and checks, and says so on stderr;\n" +
			"one that would have no requirement at all but the closing testament needs --no-checks.\n\n" +
			"With - the whole command is one JSON document on stdin, members as in the claim.create record\n" +
			"(and no_checks); every member the flags default defaults the same way.",
		Example: `  tally claim create C17 --respondent parser --work "reject incomplete Unicode escapes" \
      --check change/behavior:validator=command@1 --check change/review:validator=review@1,phases=quality --as maintainer
  echo '{"claim":"C17","respondent":"parser","work":"…","slots":[…]}' | tally claim create - --as maintainer`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin {
				d.Claim = oneArg(args)
				if d.Slots, err = parseSlotFlags(slots, checks); err != nil {
					return err
				}
			}
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				return svc.CreateClaim(c.Context(), call, d.ClaimCreate)
			}, nil)
		},
	}
	f := c.Flags()
	f.StringVar(&d.Respondent, "respondent", "", "who owes the work (takes the receipt); without it the claim is posted to a pool")
	f.StringSliceVar(&d.Pool, "pool", nil, "without --respondent: the seats that may take it (repeatable; default any seat); the first to acquire the receipt becomes the respondent")
	priorityFlag(f, &d.Priority)
	f.StringVar(&d.Work, "work", "", "what is owed, in words")
	f.StringVar(&d.Scope, "scope", "", "where the work may reach")
	f.IntVar(&d.MaxResponses, "max-responses", 0, "work cycles allowed (default 4)")
	f.StringVar(&d.Deadline, "deadline", "", "deadline: RFC 3339 or a duration from now (90m, 2h, 3d)")
	f.StringSliceVar(&d.DependsOn, "depends-on", nil, "claims that must be Satisfied first (repeatable)")
	f.StringSliceVar(&d.Awaits, "awaits", nil, "claims that must end first, however they end (repeatable)")
	f.StringSliceVar(&d.Reviews, "reviews", nil, "claims this one reviews (non-blocking)")
	f.StringSliceVar(&d.DerivedFrom, "derived-from", nil, "claims this one derives from (non-blocking)")
	f.StringVar(&d.Predecessor, "predecessor", "", "the claim this one succeeds (changed terms); without slots it inherits the predecessor's")
	f.BoolVar(&d.NoChecks, "no-checks", false, "declare no slots on purpose: the closing testament is the only requirement")
	f.StringArrayVar(&slots, "slot", nil, "a slot: NAME or NAME:observe (repeatable)")
	f.StringArrayVar(&checks, "check", nil, "a check: SLOT/ID:validator=NAME@VERSION,evaluator=WHO,... (repeatable)")
	f.StringVar(&d.RequestID, "request-id", "", "your id for this request: an exact retry prints the first answer and appends nothing")
	return c
}

// parseSlotFlags builds the slots of --slot and --check flags, in the order
// they were first named. What a flag leaves out the claim core defaults
// (claim.Create), as it does for a document on stdin or over HTTP.
func parseSlotFlags(slots, checks []string) ([]claim.SlotSpec, error) {
	var out []claim.SlotSpec
	idx := map[string]int{}
	add := func(name string, mode claim.Mode) int {
		if i, ok := idx[name]; ok {
			return i
		}
		idx[name] = len(out)
		out = append(out, claim.SlotSpec{Name: name, Mode: mode, Checks: []claim.CheckSpec{}})
		return len(out) - 1
	}
	for _, s := range slots {
		name, mode, _ := strings.Cut(s, ":")
		m := claim.Required
		switch mode {
		case "", "required":
		case "observe":
			m = claim.Observe
		default:
			return nil, refuse.Invalidf("slots.mode", "must be required or observe (--slot "+strconv.Quote(s)+")")
		}
		if _, dup := idx[name]; dup {
			return nil, refuse.Invalidf("slots.name", "declares "+strconv.Quote(name)+" twice")
		}
		add(name, m)
	}
	for _, s := range checks {
		head, kvs, _ := strings.Cut(s, ":")
		slotName, id, ok := strings.Cut(head, "/")
		if !ok || slotName == "" || id == "" {
			return nil, usagef("check: %q: must start SLOT/ID:", s)
		}
		ch := claim.CheckSpec{ID: id}
		for _, kv := range strings.Split(kvs, ",") {
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return nil, usagef("check: %q: %q is not KEY=VALUE", s, kv)
			}
			switch k {
			case "validator":
				ch.Validator = parseValidator(v)
			case "evaluator":
				ch.Evaluator = v
			case "mode":
				ch.Mode = claim.Mode(v)
			case "phases":
				ch.Phases = nil
				for _, p := range strings.Split(v, "+") {
					ch.Phases = append(ch.Phases, claim.Phase(p))
				}
			case "attempts":
				n, err := strconv.Atoi(v)
				if err != nil {
					return nil, usagef("check: %q: attempts must be a number", s)
				}
				ch.Attempts = n
			case "fallbacks":
				for _, fb := range strings.Split(v, "+") {
					ch.Fallbacks = append(ch.Fallbacks, parseValidator(fb))
				}
			default:
				return nil, usagef("check: %q: unknown key %q (validator, evaluator, mode, phases, attempts, fallbacks)", s, k)
			}
		}
		if ch.Validator.Name == "" {
			return nil, usagef("check: %q: validator=NAME[@VERSION] is required", s)
		}
		i := add(slotName, claim.Required)
		out[i].Checks = append(out[i].Checks, ch)
	}
	return out, nil
}

func parseValidator(v string) claim.Validator {
	name, version, _ := strings.Cut(v, "@")
	return claim.Validator{Name: name, Version: version}
}

func newClaimPost(g *global) *cobra.Command {
	var d struct {
		api.ClaimPost
		WithRequestID
	}
	c := &cobra.Command{
		Use:   "post ID [--failed --reason TEXT] | post -",
		Short: "Make a generated claim actionable (claimant), or record that posting failed",
		Args:  cobra.ExactArgs(1),
		RunE:  claimStep(g, &d, &d.ClaimPost, &d.Claim, &d.RequestID, cliService.PostClaim, nil),
	}
	c.Flags().BoolVar(&d.Failed, "failed", false, "posting failed: PostFailed (needs --reason)")
	c.Flags().StringVar(&d.Reason, "reason", "", "why posting failed")
	d.requestIDFlag(c.Flags())
	return c
}

// newClaimEnd is cancel or revoke: the claimant ends the claim with a reason.
func newClaimEnd(g *global, verb string) *cobra.Command {
	var d struct {
		api.ClaimEnd
		WithRequestID
	}
	short := map[string]string{
		"cancel": "End a claim: Cancelled (claimant; fences running checks)",
		"revoke": "Withdraw the work from its receipt holder: Revoked (claimant; fences running checks)",
	}[verb]
	write := cliService.CancelClaim
	if verb == "revoke" {
		write = cliService.RevokeClaim
	}
	c := &cobra.Command{
		Use:   verb + " ID --reason TEXT | " + verb + " -",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE:  claimStep(g, &d, &d.ClaimEnd, &d.Claim, &d.RequestID, write, nil),
	}
	c.Flags().StringVar(&d.Reason, "reason", "", "why (required)")
	d.requestIDFlag(c.Flags())
	return c
}

func newClaimSupersede(g *global) *cobra.Command {
	var d struct {
		api.ClaimSupersede
		WithRequestID
	}
	c := &cobra.Command{
		Use:     "supersede ID --successor ID [--reason TEXT] | supersede -",
		Short:   "End an open claim in favour of a successor that names it as predecessor: Superseded",
		Example: `  tally claim create C18 --predecessor C17 ... && tally claim supersede C17 --successor C18 --as maintainer`,
		Args:    cobra.ExactArgs(1),
		RunE:    claimStep(g, &d, &d.ClaimSupersede, &d.Claim, &d.RequestID, cliService.SupersedeClaim, nil),
	}
	c.Flags().StringVar(&d.Successor, "successor", "", "the successor claim (must name this one as predecessor)")
	c.Flags().StringVar(&d.Reason, "reason", "", "why")
	d.requestIDFlag(c.Flags())
	return c
}

func newClaimShow(g *global) *cobra.Command {
	var o readOptions
	var d struct {
		Claim string `json:"claim"`
		Now   string `json:"now,omitempty"`
	}
	c := &cobra.Command{
		Use:   "show ID | show -",
		Short: "Show a claim: state, each slot's witness and checks, testaments, artifacts, relations, why it ended",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d.Now = o.now
			if err := g.claimDoc(args, &d, &d.Claim); err != nil {
				return err
			}
			now, err := parseNow(d.Now, g.io.Now)
			if err != nil {
				return err
			}
			svc, call, err := g.actorReader(now)
			if err != nil {
				return err
			}
			shown, err := svc.Claim(c.Context(), call, d.Claim)
			if err != nil {
				return err
			}
			return g.printDoc(shown.Doc, func(w io.Writer) error {
				printClaim(w, &shown.Claim, now, g.color())
				printCustody(w, shown.Custody, g.color())
				return nil
			})
		},
	}
	o.bind(c)
	return c
}

func newClaimLs(g *global) *cobra.Command {
	var o readOptions
	var d struct {
		States      []string `json:"states,omitempty"`
		Open        bool     `json:"open,omitempty"`
		Overdue     bool     `json:"overdue,omitempty"`
		Claimant    string   `json:"claimant,omitempty"`
		Respondent  string   `json:"respondent,omitempty"`
		Participant string   `json:"participant,omitempty"`
		Now         string   `json:"now,omitempty"`
	}
	c := &cobra.Command{
		Use:   "ls [--open | --overdue | --state S...] [--claimant WHO] [--respondent WHO] [--participant WHO] | ls -",
		Short: "List claims in creation order (default: all)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			d.Now = o.now
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if len(args) == 1 && !stdin {
				return usagef("ls takes no argument (or - for a JSON document on stdin)")
			}
			now, err := parseNow(d.Now, g.io.Now)
			if err != nil {
				return err
			}
			f := api.ClaimQuery{State: d.States, Open: d.Open, Overdue: d.Overdue, Claimant: d.Claimant, Respondent: d.Respondent, Participant: d.Participant}.Filter()
			svc, call, err := g.actorReader(now)
			if err != nil {
				return err
			}
			res, err := svc.ListClaims(c.Context(), call, f)
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(res.JSON)
				return err
			}
			list := res.Claims
			if len(list) == 0 {
				fmt.Fprintln(g.io.Out, "no claims")
				return nil
			}
			t := newTable(g.io.Out)
			fmt.Fprintln(t, "CLAIM\tSTATE\tDEADLINE\tCLAIMANT → RESPONDENT\tWORK")
			for _, s := range list {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s → %s\t%s\n", s.Claim, paint(g.color(), claimColor(s.State, s.Overdue), stateLabel(s.State, s.Overdue)),
					orDash(s.Deadline), s.Claimant, cmp.Or(s.Respondent, "(pool)"), clip(s.Work, 50))
			}
			return t.Flush()
		},
	}
	f := c.Flags()
	f.BoolVar(&d.Open, "open", false, "only claims not yet ended")
	f.BoolVar(&d.Overdue, "overdue", false, "only open claims past their deadline (no fact committed yet)")
	f.StringSliceVar(&d.States, "state", nil, "only claims in these states (repeatable: Satisfied, ValidationFailed, Expired, …)")
	f.StringVar(&d.Claimant, "claimant", "", "only claims issued by WHO")
	f.StringVar(&d.Respondent, "respondent", "", "only claims owed by WHO")
	f.StringVar(&d.Participant, "participant", "", "only claims WHO takes part in (claimant, respondent, holder, evaluator)")
	o.bind(c)
	return c
}

func newClaimGraph(g *global) *cobra.Command {
	var format string
	c := &cobra.Command{
		Use:   "graph [--format text|dot|json]",
		Short: "Every relation between claims (depends_on, awaits, reviews, derived_from, predecessor) and whether it holds",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var d struct {
				Format string `json:"format,omitempty"`
			}
			d.Format = format
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if len(args) == 1 && !stdin {
				return usagef("graph takes no argument (or - for a JSON document on stdin)")
			}
			if g.json {
				d.Format = "json"
			}
			if d.Format != "text" && d.Format != "dot" && d.Format != "json" {
				return usagef("format: must be text, dot or json")
			}
			svc, call, err := g.actorReader(time.Time{})
			if err != nil {
				return err
			}
			graph, err := svc.ClaimGraph(c.Context(), call)
			if err != nil {
				return err
			}
			if d.Format == "json" {
				_, err := g.io.Out.Write(graph.JSON)
				return err
			}
			return writeClaimGraph(g.io.Out, d.Format, graph.Claims, graph.Edges)
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text, dot or json")
	return c
}

func writeClaimGraph(w io.Writer, format string, nodes []claim.Summary, edges []claim.Edge) error {
	switch format {
	case "dot":
		fmt.Fprintln(w, "digraph claims {\n  rankdir=LR;\n  node [shape=box];")
		for _, n := range nodes {
			fmt.Fprintf(w, "  %s [label=%s];\n", dotQuote(n.Claim), dotQuote(n.Claim+"\n"+string(n.State)))
		}
		for _, e := range edges {
			style := ""
			if e.Relation != "depends_on" && e.Relation != "awaits" {
				style = ", style=dashed"
			}
			fmt.Fprintf(w, "  %s -> %s [label=%s%s];\n", dotQuote(e.From), dotQuote(e.To), dotQuote(e.Relation), style)
		}
		fmt.Fprintln(w, "}")
		return nil
	}
	state := map[string]claim.Status{}
	for _, n := range nodes {
		state[n.Claim] = n.State
	}
	if len(edges) == 0 {
		fmt.Fprintln(w, "no relations between claims")
		return nil
	}
	t := newTable(w)
	fmt.Fprintln(t, "FROM\tRELATION\tTO\tTARGET STATE\tHOLDS")
	for _, e := range edges {
		holds := "no"
		if e.Holds {
			holds = "yes"
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\n", e.From, e.Relation, e.To, orDash(string(state[e.To])), holds)
	}
	return t.Flush()
}
