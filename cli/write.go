package cli

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/instant"
	"tally/promise"
	"tally/service"
)

// writeOptions are the flags every write verb shares.
type writeOptions struct {
	meta      string
	requestID string
}

func (o *writeOptions) bind(c *cobra.Command) {
	c.Flags().StringVar(&o.meta, "meta", "", "a JSON object of your own (at most 8 KiB), kept and never read by tally")
	c.Flags().StringVar(&o.requestID, "request-id", "", "your id for this request: an exact retry prints the first answer and appends nothing")
}

// promiseWrite runs one promise write through the Service as actor and
// prints its outcome: the response document with --json, else human's
// lines, with the write's warnings on stderr. A retry under the same
// --request-id prints the same, from the recorded document.
func (g *global) promiseWrite(c *cobra.Command, actor string, o writeOptions,
	run func(ctx context.Context, svc cliService, call service.Call) (service.PromiseWritten, error),
	human func(w io.Writer, res *service.PromiseWritten)) error {
	svc, call, err := g.serviceCall(actor, o.requestID, time.Time{})
	if err != nil {
		return err
	}
	res, err := run(c.Context(), svc, call)
	if err != nil {
		return err
	}
	return g.printDoc(res.Doc, func(w io.Writer) error {
		for _, warning := range res.Warnings {
			fmt.Fprintln(g.io.Err, "warning: "+warning)
		}
		human(w, &res)
		return nil
	})
}

type promiseOptions struct {
	writeOptions
	by, to, until, on, task, id string
	textFromStdin               string
	priority                    *int // kept in meta as "priority"
}

func newPromise(g *global) *cobra.Command {
	o := &promiseOptions{}
	c := &cobra.Command{
		Use:   "promise [TEXT]",
		Short: "Declare a promise (without TEXT: one JSON record on stdin)",
		Example: `  tally promise "hand back a reviewed schema" --by reviewer --to author --until 2h
  echo '{"promise":"ship it","by":"a","to":"b","until":"2026-09-01T17:00:00Z"}' | tally promise`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				if err := o.fromStdin(g.io.In); err != nil {
					return err
				}
			}
			text := ""
			if len(args) == 1 {
				text = args[0]
			} else {
				text = o.textFromStdin
			}
			actor, err := g.requireActor(o.by)
			if err != nil {
				return err
			}
			meta, err := declarePriority(o.meta, o.priority)
			if err != nil {
				return err
			}
			d := api.PromiseDeclare{ID: o.id, Promise: text, By: o.by, To: o.to, On: o.on, Until: o.until, Task: o.task, Meta: api.Object(meta)}
			return g.promiseWrite(c, actor, o.writeOptions, func(ctx context.Context, svc cliService, call service.Call) (service.PromiseWritten, error) {
				return svc.DeclarePromise(ctx, call, d)
			}, func(w io.Writer, res *service.PromiseWritten) {
				fmt.Fprintln(w, res.Promise.ID)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&o.by, "by", "", "the debtor (default: the acting identity)")
	f.StringVar(&o.to, "to", "", "the creditor")
	f.StringVar(&o.until, "until", "", "deadline: RFC 3339 or a duration from now (90m, 2h, 3d)")
	f.StringVar(&o.on, "on", "", "antecedent promise id: this one is owed once that one is satisfied")
	f.StringVar(&o.task, "task", "", "the A2A task this promise covers")
	f.StringVar(&o.id, "id", "", "your own id (at most 128 characters, no whitespace); default: minted pnk_xxxxxx")
	priorityFlag(f, &o.priority)
	o.bind(c)
	return c
}

// fromStdin reads the declaration from one api.PromiseDeclare on stdin.
func (o *promiseOptions) fromStdin(in io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return usagef("promise: give TEXT or one JSON record on stdin")
	}
	var d api.PromiseDeclare
	if err := api.Decode("stdin", b, &d); err != nil {
		return err
	}
	// The members given override the flags.
	o.textFromStdin = d.Promise
	for _, m := range []struct {
		flag *string
		doc  string
	}{{&o.id, d.ID}, {&o.by, d.By}, {&o.to, d.To}, {&o.on, d.On},
		{&o.until, d.Until}, {&o.task, d.Task}, {&o.meta, string(d.Meta)}} {
		*m.flag = cmp.Or(m.doc, *m.flag)
	}
	return nil
}

func newAmend(g *global) *cobra.Command {
	var o writeOptions
	var until, reason string
	c := &cobra.Command{
		Use:     "amend ID --until WHEN",
		Short:   "Move a promise's deadline (debtor only); the old deadline stays in its horizons",
		Example: `  tally amend desk/ship-91 --until 2026-09-01T18:00:00Z --reason "nudge 1" --as reviewer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			d := api.PromiseAmend{ID: args[0], Until: until, Reason: reason, Meta: api.Object(o.meta)}
			return g.promiseWrite(c, actor, o, func(ctx context.Context, svc cliService, call service.Call) (service.PromiseWritten, error) {
				return svc.AmendPromise(ctx, call, d)
			}, func(w io.Writer, res *service.PromiseWritten) {
				v := &res.Promise
				prev := v.Horizons[len(v.Horizons)-2]
				fmt.Fprintf(w, "%s: deadline %s (was %s; horizon %d)\n", v.ID, instant.Format(v.Until), instant.Format(prev), len(v.Horizons))
			})
		},
	}
	c.Flags().StringVar(&until, "until", "", "new deadline: RFC 3339 or a duration from now")
	c.Flags().StringVar(&reason, "reason", "", "why the deadline moved")
	o.bind(c)
	return c
}

func newResolve(g *global) *cobra.Command {
	var o writeOptions
	var satisfied, cancelled, released bool
	var evidence []string
	var reason string
	c := &cobra.Command{
		Use:   "resolve ID (--satisfied --evidence REF... | --cancelled --reason TEXT | --released [--reason TEXT])",
		Short: "End a promise: satisfied with evidence, cancelled with a reason (debtor), or released (creditor)",
		Example: `  tally resolve desk/ship-91 --satisfied --evidence https://example.org/reviews/91 --as reviewer
  tally resolve pnk_1 --cancelled --reason "superseded by pnk_2" --as reviewer
  tally resolve pnk_1 --released --as author`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			n := 0
			as := ""
			for flag, set := range map[string]bool{promise.AsSatisfied: satisfied, promise.AsCancelled: cancelled, promise.AsReleased: released} {
				if set {
					n++
					as = flag
				}
			}
			if n != 1 {
				return usagef("as: give exactly one of --satisfied, --cancelled, --released")
			}
			if len(args) > 1 {
				// pinki's `--evidence REF…` takes several references.
				if !c.Flags().Changed("evidence") {
					return usagef("resolve takes one ID; pass references with --evidence")
				}
				evidence = append(evidence, args[1:]...)
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			d := api.PromiseResolve{ID: args[0], As: as, Evidence: evidence, Reason: reason, Meta: api.Object(o.meta)}
			return g.promiseWrite(c, actor, o, func(ctx context.Context, svc cliService, call service.Call) (service.PromiseWritten, error) {
				return svc.ResolvePromise(ctx, call, d)
			}, func(w io.Writer, res *service.PromiseWritten) {
				fmt.Fprintf(w, "%s: %s by %s\n", res.Promise.ID, as, actor)
			})
		},
	}
	f := c.Flags()
	f.BoolVar(&satisfied, "satisfied", false, "the debtor delivered: needs --evidence")
	f.BoolVar(&cancelled, "cancelled", false, "the debtor abandons it: needs --reason")
	f.BoolVar(&released, "released", false, "the creditor lets the debtor off")
	f.StringArrayVar(&evidence, "evidence", nil, "a reference to what was delivered (repeatable)")
	f.StringVar(&reason, "reason", "", "why it was cancelled or released")
	o.bind(c)
	return c
}

func newAssess(g *global) *cobra.Command {
	var o writeOptions
	var violated bool
	var observer, note string
	c := &cobra.Command{
		Use:     "assess ID --violated [--observer WHO] [--note TEXT]",
		Short:   "Record your judgment that a promise was violated; it sits beside the promise and changes no state",
		Example: `  tally assess desk/ship-91 --violated --observer author --note "deadline passed, nothing delivered"`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if !violated {
				return usagef("state: --violated is required (the only assessment)")
			}
			actor, err := g.requireActor(observer)
			if err != nil {
				return err
			}
			d := api.PromiseAssess{ID: args[0], State: promise.StateViolated, Observer: observer, Note: note, Meta: api.Object(o.meta)}
			return g.promiseWrite(c, actor, o, func(ctx context.Context, svc cliService, call service.Call) (service.PromiseWritten, error) {
				return svc.AssessPromise(ctx, call, d)
			}, func(w io.Writer, res *service.PromiseWritten) {
				// The observer defaults to, and may only be, the acting identity.
				fmt.Fprintf(w, "%s: assessed violated by %s (state stays %s)\n", res.Promise.ID, cmp.Or(observer, actor), res.Promise.State)
			})
		},
	}
	c.Flags().BoolVar(&violated, "violated", false, "the judgment: violated")
	c.Flags().StringVar(&observer, "observer", "", "who judges (default and only allowed value: the acting identity)")
	c.Flags().StringVar(&note, "note", "", "why")
	o.bind(c)
	return c
}
