package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/instant"
	"tally/prime"
	"tally/promise"
	"tally/service"
)

// readOptions are the flags every read verb shares.
type readOptions struct{ now string }

func (o *readOptions) bind(c *cobra.Command) {
	c.Flags().StringVar(&o.now, "now", "", "evaluate views at this RFC 3339 time instead of the clock (output is then byte-for-byte reproducible)")
}

// promises lists the promises f selects at --now (else the clock).
func (g *global) promises(ctx context.Context, o readOptions, f promise.Filter) (service.PromiseList, error) {
	svc, call, err := g.reader(o)
	if err != nil {
		return service.PromiseList{}, err
	}
	// Text is printed from the views; only --json prints the document.
	call.ViewsOnly = !g.json
	return svc.ListPromises(ctx, call, f)
}

// printPromiseList prints the list document of the promises f selects at
// --now under name: the document a server sent, or, from a local ledger,
// the same bytes written out from the views in chunks (api.WritePromiseList)
// rather than built whole first.
func (g *global) printPromiseList(ctx context.Context, o readOptions, f promise.Filter, name string) error {
	svc, call, err := g.reader(o)
	if err != nil {
		return err
	}
	call.ViewsOnly = true
	res, err := svc.ListPromises(ctx, call, f)
	if err != nil {
		return err
	}
	if len(res.JSON) > 0 {
		_, err := g.io.Out.Write(res.JSON)
		return err
	}
	return api.WritePromiseList(g.io.Out, res.Now, name, res.Promises)
}

// reader is the Service and the Call of a read at --now.
func (g *global) reader(o readOptions) (cliService, service.Call, error) {
	now, err := parseNow(o.now, g.io.Now)
	if err != nil {
		return nil, service.Call{}, err
	}
	return g.serviceCall("", "", now)
}

func newShow(g *global) *cobra.Command {
	var o readOptions
	c := &cobra.Command{
		Use:     "show ID",
		Short:   "Show one promise: its horizons, state, evidence, and every assessment beside it",
		Example: `  tally show desk/ship-91 --now 2026-09-02T10:00:00Z`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			svc, call, err := g.reader(o)
			if err != nil {
				return err
			}
			res, err := svc.Promise(c.Context(), call, args[0])
			if err != nil {
				return err
			}
			return g.printDoc(res.Doc, func(w io.Writer) error {
				printShow(w, &res.Promise, res.Now, g.color())
				return nil
			})
		},
	}
	o.bind(c)
	return c
}

// printShow prints the record and, beside it, what observers said: two
// truths the ledger keeps without reconciling.
func printShow(w io.Writer, v *promise.View, now time.Time, color bool) {
	state := string(v.State)
	if v.Overdue {
		state += ", overdue " + short(since(v.Until, now))
	}
	fmt.Fprintf(w, "%s  %s\n", v.ID, paint(color, stateColor(v), state))
	t := newTable(w)
	fmt.Fprintf(t, "  promise\t%s\n", v.Promise)
	fmt.Fprintf(t, "  by → to\t%s → %s\n", v.By, v.To)
	if v.On != "" {
		fmt.Fprintf(t, "  on\t%s\n", v.On)
	}
	if v.Task != "" {
		fmt.Fprintf(t, "  task\t%s\n", v.Task)
	}
	fmt.Fprintf(t, "  declared\t%s\n", instant.Format(v.Declared))
	for i, h := range v.Horizons {
		label := "  horizon " + fmt.Sprint(i+1)
		cur := ""
		if i == len(v.Horizons)-1 {
			cur = "  (current, " + relative(h, now) + ")"
		}
		fmt.Fprintf(t, "%s\t%s%s\n", label, instant.Format(h), cur)
	}
	if v.Meta != "" {
		fmt.Fprintf(t, "  meta\t%s\n", v.Meta)
	}
	t.Flush()

	left := []string{"THE LEDGER"}
	if v.ResolvedBy != "" {
		left = append(left, fmt.Sprintf("%s by %s", v.State, v.ResolvedBy), "at "+instant.Format(v.ResolvedAt))
		if late := since(v.Until, v.ResolvedAt); late > 0 {
			left = append(left, short(late)+" after the deadline")
		}
		for _, e := range v.Evidence {
			left = append(left, "evidence "+e)
		}
		if v.Reason != "" {
			left = append(left, "reason "+v.Reason)
		}
	} else {
		left = append(left, string(v.State)+", unresolved")
	}
	right := []string{"OBSERVERS"}
	if len(v.Assessments) == 0 {
		right = append(right, "(no assessments)")
	}
	for _, a := range v.Assessments {
		right = append(right, fmt.Sprintf("%s by %s", a.State, a.Observer), "at "+instant.Format(a.TS))
		if a.Note != "" {
			right = append(right, fmt.Sprintf("%q", a.Note))
		}
	}
	fmt.Fprintln(w)
	t = newTable(w)
	for i := 0; i < max(len(left), len(right)); i++ {
		l, r := "", ""
		if i < len(left) {
			l = left[i]
		}
		if i < len(right) {
			r = right[i]
		}
		fmt.Fprintf(t, "  %s\t│ %s\n", l, r)
	}
	t.Flush()
}

func newLs(g *global) *cobra.Command {
	var o readOptions
	var open, overdue, all bool
	var by, to string
	c := &cobra.Command{
		Use:   "ls [--open | --overdue | --all] [--by WHO] [--to WHO]",
		Short: "List promises (default: open ones, in declaration order)",
		Example: `  tally ls --overdue --by reviewer
  tally ls --all --json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if btoi(open)+btoi(overdue)+btoi(all) > 1 {
				return usagef("give at most one of --open, --overdue, --all")
			}
			state := "open"
			if all {
				state = "all"
			} else if overdue {
				state = "overdue"
			}
			if g.json {
				return g.printPromiseList(c.Context(), o, promise.Filter{State: state, By: by, To: to}, "promises")
			}
			res, err := g.promises(c.Context(), o, promise.Filter{State: state, By: by, To: to})
			if err != nil {
				return err
			}
			vs, now := res.Promises, res.Now
			if len(vs) == 0 {
				fmt.Fprintln(g.io.Out, "no promises")
				return nil
			}
			t := newTable(g.io.Out)
			t.Grow(128 * (len(vs) + 1))
			fmt.Fprintln(t, "ID\tSTATE\tDUE\tBY → TO\tPROMISE")
			// Each row appended into one buffer: Fprintf's boxing and
			// clip's copies were most of a long list's allocations.
			var row []byte
			for i := range vs {
				v := &vs[i]
				row = append(append(row[:0], v.ID...), '\t')
				row = append(append(row, paint(g.color(), stateColor(v), string(v.State))...), '\t')
				row = append(append(row, due(v, now)...), '\t')
				row = append(append(append(append(row, v.By...), " → "...), v.To...), '\t')
				row = append(appendClip(row, v.Promise, 60), '\n')
				t.Write(row)
			}
			return t.Flush()
		},
	}
	f := c.Flags()
	f.BoolVar(&open, "open", false, "conditional and owed promises (the default)")
	f.BoolVar(&overdue, "overdue", false, "owed promises past their deadline")
	f.BoolVar(&all, "all", false, "every promise")
	f.StringVar(&by, "by", "", "only promises this debtor owes")
	f.StringVar(&to, "to", "", "only promises owed to this creditor")
	o.bind(c)
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func newOwed(g *global) *cobra.Command {
	var o readOptions
	var format string
	c := &cobra.Command{
		Use:   "owed [--as WHO] [--format text|prime]",
		Short: "What a seat owes, overdue first: paste it into a fresh session of that seat",
		Example: `  tally owed --as reviewer
  TALLY_ACTOR=reviewer tally owed --json
  tally owed --format prime      # the same as tally prime`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			switch format {
			case "prime":
				return g.runPrime(c.Context(), primeOptions{now: o.now, maxTokens: prime.TokensDefault})
			case "text":
			default:
				return usagef("format: must be text or prime")
			}
			who, err := g.requireActor("")
			if err != nil {
				return err
			}
			res, err := g.promises(c.Context(), o, api.OwedQuery{}.Filter(who))
			if err != nil {
				return err
			}
			vs, now := res.Promises, res.Now
			prime.SortOwed(vs)
			if g.json {
				return writeJSONDoc(g.io.Out, member("as", jsonString(who)), member("now", jsonString(instant.Format(now))), member("owed", viewArray(vs)))
			}
			nOver := 0
			for i := range vs {
				if vs[i].Overdue {
					nOver++
				}
			}
			if len(vs) == 0 {
				fmt.Fprintf(g.io.Out, "%s owes nothing open (as of %s).\n", who, humanTime(now))
				return nil
			}
			fmt.Fprintf(g.io.Out, "%s owes %d open promise(s), %d overdue, as of %s:\n", who, len(vs), nOver, humanTime(now))
			for i := range vs {
				v := &vs[i]
				fmt.Fprintf(g.io.Out, "- [%s] %s to %s: %s (until %s)\n", due(v, now), v.ID, v.To, clip(v.Promise, 100), instant.Format(v.Until))
			}
			cmds, err := g.commands(c.Context(), who)
			if err != nil {
				return err
			}
			// One command a line, each runnable once its CAPITALS are filled.
			fmt.Fprintf(g.io.Out, "Resolve one with: %s\n  or:   %s\nMove a deadline with: %s\n",
				cmds.Tally("resolve ID --satisfied --evidence REF"), cmds.Tally("resolve ID --cancelled --reason TEXT"), cmds.Tally("amend ID --until WHEN --reason TEXT"))
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text, or prime: the start-of-session context tally prime prints")
	o.bind(c)
	return c
}

func viewArray(vs []promise.View) []byte { return api.ViewArray(vs) }

func newGraph(g *global) *cobra.Command {
	var o readOptions
	var format string
	c := &cobra.Command{
		Use:   "graph [--format text|dot|json]",
		Short: "The promise graph: antecedent edges, and who owes whom",
		Example: `  tally graph
  tally graph --format dot | dot -Tsvg > promises.svg`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if g.json {
				format = "json"
			}
			if format != "text" && format != "dot" && format != "json" {
				return usagef("format: must be text, dot or json")
			}
			res, err := g.promises(c.Context(), o, promise.Filter{State: "all"})
			if err != nil {
				return err
			}
			return writeGraph(g.io.Out, format, res.Promises, res.Now)
		},
	}
	c.Flags().StringVar(&format, "format", "text", "text, dot or json")
	o.bind(c)
	return c
}

type pair struct{ by, to string }

type pairCount struct {
	open, overdue, total int
}

func writeGraph(w io.Writer, format string, vs []promise.View, now time.Time) error {
	pairs := map[pair]*pairCount{}
	var keys []pair
	for i := range vs {
		k := pair{vs[i].By, vs[i].To}
		pc := pairs[k]
		if pc == nil {
			pc = &pairCount{}
			pairs[k] = pc
			keys = append(keys, k)
		}
		pc.total++
		if vs[i].State.Open() {
			pc.open++
		}
		if vs[i].Overdue {
			pc.overdue++
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].by != keys[j].by {
			return keys[i].by < keys[j].by
		}
		return keys[i].to < keys[j].to
	})
	switch format {
	case "json":
		nodes := make([]byte, 0, 128*len(vs))
		edges := []byte{'['}
		nodes = append(nodes, '[')
		ne := 0
		for i := range vs {
			v := &vs[i]
			if i > 0 {
				nodes = append(nodes, ',')
			}
			nodes = fmt.Appendf(nodes, `{"id":%s,"state":%s,"overdue":%t,"by":%s,"to":%s}`, jsonString(v.ID), jsonString(string(v.State)), v.Overdue, jsonString(v.By), jsonString(v.To))
			if v.On != "" {
				if ne > 0 {
					edges = append(edges, ',')
				}
				ne++
				edges = fmt.Appendf(edges, `{"from":%s,"on":%s}`, jsonString(v.ID), jsonString(v.On))
			}
		}
		nodes = append(nodes, ']')
		edges = append(edges, ']')
		ps := []byte{'['}
		for i, k := range keys {
			if i > 0 {
				ps = append(ps, ',')
			}
			pc := pairs[k]
			ps = fmt.Appendf(ps, `{"by":%s,"to":%s,"open":%d,"overdue":%d,"total":%d}`, jsonString(k.by), jsonString(k.to), pc.open, pc.overdue, pc.total)
		}
		ps = append(ps, ']')
		return writeJSONDoc(w, member("now", jsonString(instant.Format(now))), member("promises", nodes), member("edges", edges), member("parties", ps))
	case "dot":
		fmt.Fprintln(w, "digraph promises {\n  rankdir=LR;\n  node [shape=box];")
		for i := range vs {
			v := &vs[i]
			fmt.Fprintf(w, "  %s [label=%s];\n", dotQuote(v.ID), dotQuote(v.ID+"\n"+string(v.State)+"\n"+v.By+" → "+v.To))
			if v.On != "" {
				fmt.Fprintf(w, "  %s -> %s [label=\"on\"];\n", dotQuote(v.ID), dotQuote(v.On))
			}
		}
		fmt.Fprintln(w, "}")
		return nil
	}
	fmt.Fprintln(w, "who owes whom (open / overdue / total):")
	t := newTable(w)
	for _, k := range keys {
		pc := pairs[k]
		fmt.Fprintf(t, "  %s → %s\t%d open\t%d overdue\t%d total\n", k.by, k.to, pc.open, pc.overdue, pc.total)
	}
	t.Flush()
	fmt.Fprintln(w, "antecedents (a promise is owed once the one it is on is satisfied):")
	n := 0
	for i := range vs {
		if v := &vs[i]; v.On != "" {
			fmt.Fprintf(w, "  %s (%s) on %s\n", v.ID, v.State, v.On)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "  (none)")
	}
	return nil
}

func dotQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}
