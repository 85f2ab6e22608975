package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/claim"
	"tally/service"
)

func newReceiptCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "receipt",
		Short: "The execution receipt: the respondent acquires it; the claimant adopts it for a new holder",
	}
	c.AddCommand(newReceiptAcquire(g), newReceiptAdopt(g))
	return c
}

func newReceiptAcquire(g *global) *cobra.Command {
	var d struct {
		api.ClaimReceipt
		WithRequestID
	}
	c := &cobra.Command{
		Use:     "acquire CLAIM [--decline --reason TEXT] | acquire -",
		Short:   "Take a posted claim's execution receipt at generation 1 (respondent), or decline it: ReceiptFailed",
		Example: `  tally receipt acquire C17 --as parser`,
		Args:    cobra.ExactArgs(1),
		RunE:    claimStep(g, &d, &d.ClaimReceipt, &d.Claim, &d.RequestID, cliService.AcquireReceipt, printReceipt),
	}
	c.Flags().BoolVar(&d.Decline, "decline", false, "the respondent cannot take the work: ReceiptFailed (needs --reason)")
	c.Flags().StringVar(&d.Reason, "reason", "", "why the receipt is declined")
	d.requestIDFlag(c.Flags())
	return c
}

func printReceipt(w io.Writer, v *claim.View, _ []service.ClaimRecord) {
	if v.Receipt != nil {
		fmt.Fprintf(w, "%s: receipt held by %s, generation %d (pass --generation %d with your writes)\n", v.Claim, v.Receipt.Holder, v.Receipt.Generation, v.Receipt.Generation)
	}
}

func newReceiptAdopt(g *global) *cobra.Command {
	var d struct {
		api.ClaimAdopt
		WithRequestID
	}
	c := &cobra.Command{
		Use:     "adopt CLAIM --holder WHO [--reason TEXT] | adopt -",
		Short:   "Move the receipt to a new holder at the next generation (claimant): the old holder's later writes are refused",
		Example: `  tally receipt adopt C17 --holder parser-2 --reason "parser stopped answering" --as maintainer`,
		Args:    cobra.ExactArgs(1),
		RunE:    claimStep(g, &d, &d.ClaimAdopt, &d.Claim, &d.RequestID, cliService.AdoptReceipt, printReceipt),
	}
	c.Flags().StringVar(&d.Holder, "holder", "", "the new receipt holder")
	c.Flags().StringVar(&d.Reason, "reason", "", "why the receipt moves")
	d.requestIDFlag(c.Flags())
	return c
}

func newProgressCmd(g *global) *cobra.Command {
	var d struct {
		api.ClaimProgress
		WithRequestID
	}
	c := &cobra.Command{
		Use:     "progress CLAIM --generation N --note TEXT | progress -",
		Short:   "Record progress under the execution receipt (holder, current generation): Progressed",
		Example: `  tally progress C17 --generation 1 --note "found the faulty branch" --as parser`,
		Args:    cobra.ExactArgs(1),
		RunE:    claimStep(g, &d, &d.ClaimProgress, &d.Claim, &d.RequestID, cliService.RecordProgress, nil),
	}
	c.Flags().Uint64Var(&d.Generation, "generation", 0, "the receipt generation you hold")
	c.Flags().StringVar(&d.Note, "note", "", "what happened")
	d.requestIDFlag(c.Flags())
	return c
}

func newTestamentCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "testament",
		Short: "Testaments: the holder's closing account of a work cycle, or the claimant's audit of the checks",
	}
	c.AddCommand(newTestamentClose(g), newTestamentStep(g, "post"), newTestamentStep(g, "receive"))
	return c
}

// closeDoc is `tally testament close -`'s document (api.ClaimTestament,
// and request_id).
type closeDoc struct {
	api.ClaimTestament
	WithRequestID
}

func newTestamentClose(g *global) *cobra.Command {
	var d closeDoc
	var binds, diags, results []string
	var result bool
	var confidence float64
	c := &cobra.Command{
		Use: "close CLAIM --id T --generation N --outcome complete --summary TEXT --bind SLOT=ARTIFACT ... | close -",
		Short: "Close the open work cycle with its testament (holder); --result: the claimant's audit of the checks;\n" +
			"--failed: the holder could not generate one (TestamentGenerationFailed)",
		Example: `  tally testament close C17 --id T1 --generation 1 --outcome complete --summary "length check added" --bind change=patch-a --as parser
  tally testament close C17 --id T2 --generation 1 --outcome partial --summary "no tests" --diagnostic why --as parser
  tally testament close C17 --result --id R1 --summary "behavior passed; review failed" --evidence E1 --as maintainer`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin {
				d.Claim = args[0]
				if result {
					d.Role = claim.TestamentResult
				}
				if c.Flags().Changed("confidence") {
					d.Confidence = &confidence
				}
				for _, b := range binds {
					slot, ref, ok := strings.Cut(b, "=")
					if !ok || slot == "" || ref == "" {
						return usagef("bind: %q must be SLOT=ARTIFACT[@DIGEST]", b)
					}
					art, dig, _ := strings.Cut(ref, "@")
					d.Bindings = append(d.Bindings, claim.Binding{Slot: slot, Artifact: art, Digest: dig})
				}
				d.Diagnostics = refs(diags)
				d.Results = refs(results)
			}
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				return svc.CloseTestament(c.Context(), call, d.ClaimTestament)
			}, nil)
		},
	}
	f := c.Flags()
	f.StringVar(&d.Testament, "id", "", "the testament's id (T1, …)")
	f.Uint64Var(&d.Generation, "generation", 0, "the receipt generation you hold")
	f.StringVar(&d.Outcome, "outcome", "complete", "complete, partial, refused, impossible, interrupted or failed (not complete: cite a --diagnostic)")
	f.StringVar(&d.Summary, "summary", "", "your account of the work")
	f.Float64Var(&confidence, "confidence", 0, "how sure you are, 0 to 1")
	f.StringArrayVar(&binds, "bind", nil, "SLOT=ARTIFACT[@DIGEST]: the artifact delivered for a slot (repeatable)")
	f.StringArrayVar(&diags, "diagnostic", nil, "ARTIFACT[@DIGEST]: a diagnostic artifact explaining the outcome (repeatable)")
	f.BoolVar(&result, "result", false, "the claimant's audit of the checks (ends at Posted; never drives acceptance)")
	f.StringArrayVar(&results, "evidence", nil, "with --result: ARTIFACT[@DIGEST] of a result artifact (repeatable)")
	f.BoolVar(&d.Failed, "failed", false, "the testament could not be generated: TestamentGenerationFailed (needs --generation, --reason)")
	f.StringVar(&d.Reason, "reason", "", "with --failed: why")
	d.requestIDFlag(f)
	return c
}

func refs(list []string) []claim.Ref {
	var out []claim.Ref
	for _, r := range list {
		art, dig, _ := strings.Cut(r, "@")
		out = append(out, claim.Ref{Artifact: art, Digest: dig})
	}
	return out
}

// newTestamentStep is post or receive: CLAIM TESTAMENT.
func newTestamentStep(g *global, verb string) *cobra.Command {
	var d struct {
		api.ClaimTestamentRef
		WithRequestID
	}
	short := map[string]string{
		"post":    "Post a closed testament (its author; the claimant for a result testament)",
		"receive": "Receive a posted response testament (claimant): the implicit delivery check passes",
	}[verb]
	// A post leaves the claim's state where it was: say what it did.
	var human claimHuman
	if verb == "post" {
		human = func(w io.Writer, v *claim.View, _ []service.ClaimRecord) {
			fmt.Fprintf(w, "%s: testament %s posted\n", v.Claim, d.Testament)
		}
	}
	c := &cobra.Command{
		Use:   verb + " CLAIM TESTAMENT | " + verb + " -",
		Short: short,
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if err := g.claimPair(args, &d, &d.Claim, &d.Testament, verb+" takes CLAIM TESTAMENT"); err != nil {
				return err
			}
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				if verb == "receive" {
					return svc.ReceiveTestament(c.Context(), call, d.ClaimTestamentRef)
				}
				return svc.PostTestament(c.Context(), call, d.ClaimTestamentRef)
			}, human)
		},
	}
	d.requestIDFlag(c.Flags())
	return c
}
