package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/artifact"
	"tally/claim"
	"tally/ledger"
	"tally/rule"
	"tally/validate"
)

func newCheckCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "check",
		Short: "Checks: the designated evaluator begins an attempt on one exact artifact and reports its verdict",
	}
	c.AddCommand(newCheckBegin(g), newCheckReport(g), newCheckRun(g))
	return c
}

// checkDoc is the document of check begin, report and run.
type checkDoc struct {
	Check          string `json:"check"`
	Claim          string `json:"claim"`
	Artifact       string `json:"artifact,omitempty"`
	Digest         string `json:"digest,omitempty"`
	Result         string `json:"result,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	EvidenceDigest string `json:"evidence_digest,omitempty"`
	EvidenceFile   string `json:"evidence_file,omitempty"`
	Note           string `json:"note,omitempty"`
	Command        string `json:"command,omitempty"`
	Timeout        string `json:"timeout,omitempty"`
	RequestID      string `json:"request_id,omitempty"`
}

func (d *checkDoc) load(g *global, args []string) error {
	stdin, err := g.fromStdin(args, d)
	if err != nil {
		return err
	}
	if !stdin {
		d.Check = args[0]
	}
	if err := need("check", d.Check); err != nil {
		return err
	}
	return need("claim", d.Claim)
}

func (d *checkDoc) bindTarget(c *cobra.Command) {
	c.Flags().StringVar(&d.Claim, "claim", "", "the claim")
	c.Flags().StringVar(&d.Artifact, "artifact", "", "the target artifact's id")
	c.Flags().StringVar(&d.Digest, "digest", "", "the target's artifact digest (default: the recorded one)")
	c.Flags().StringVar(&d.RequestID, "request-id", "", "your id for this request")
}

// attemptOn returns the check's attempt on a target as the view shows it.
func attemptOn(v *claim.View, check, art string) (*claim.CheckView, *claim.AttemptView) {
	for i := range v.Slots {
		for j := range v.Slots[i].Checks {
			ch := &v.Slots[i].Checks[j]
			if ch.ID != check {
				continue
			}
			for k := range ch.Targets {
				if ch.Targets[k].Artifact == art {
					return ch, &ch.Targets[k]
				}
			}
			return ch, nil
		}
	}
	return nil, nil
}

// guardTarget verifies the target's bytes before a record that begins an
// attempt on it is appended. It does nothing when the claim or artifact is
// unknown (the ledger refuses those itself) or when onlyIfNew and an
// attempt is already running.
func (g *global) guardTarget(ctx context.Context, l *ledger.Ledger, d *checkDoc, onlyIfNew bool) error {
	a, ok := lookupArtifact(l, d.Claim, d.Artifact)
	if !ok {
		return nil
	}
	if onlyIfNew {
		v, err := g.claimView(l, d.Claim, g.io.Now())
		if err != nil {
			return err
		}
		if _, at := attemptOn(&v, d.Check, d.Artifact); at != nil && at.State == "running" {
			return nil
		}
	}
	objs, err := g.objects()
	if err != nil {
		return err
	}
	return g.verifyArtifact(ctx, objs, a)
}

func newCheckBegin(g *global) *cobra.Command {
	var d checkDoc
	c := &cobra.Command{
		Use:     "begin CHECK --claim C --artifact ID [--digest D] | begin -",
		Short:   "Begin the next attempt of a check on one target (designated evaluator); its bytes are verified first",
		Example: `  tally check begin behavior --claim C17 --artifact patch-a --as maintainer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := d.load(g, args); err != nil {
				return err
			}
			if err := need("artifact", d.Artifact); err != nil {
				return err
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := g.guardTarget(c.Context(), l, &d, false); err != nil {
				return err
			}
			res, err := l.SubmitClaim(c.Context(), claim.BeginCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}, ledger.WriteOptions{Actor: actor, RequestID: d.RequestID})
			if err != nil {
				return err
			}
			return g.printClaimWrite(l, d.Claim, res, printCheckRecords)
		},
	}
	d.bindTarget(c)
	return c
}

func printCheckRecords(w io.Writer, _ *claim.View, res []ledger.Result) {
	for _, r := range res {
		e, err := claim.Decode(r.Line)
		if err != nil {
			continue
		}
		switch e.Type {
		case claim.TypeCheckBegin:
			fmt.Fprintf(w, "%s: %s on %s began (phase %s, %s@%s, handler %d, attempt %d)\n", e.Claim, e.Check, e.Artifact, e.Phase, e.Validator.Name, e.Validator.Version, e.Handler, e.Attempt)
		case claim.TypeCheckVerdict:
			note := ""
			if e.Note != "" {
				note = ": " + e.Note
			}
			fmt.Fprintf(w, "%s: %s on %s: %s (evidence %s)%s\n", e.Claim, e.Check, e.Artifact, e.Result, e.Evidence, note)
		case claim.TypeArtifact:
			fmt.Fprintf(w, "%s: evidence %s stored (%d bytes, digest %s)\n", e.Claim, e.Artifact, e.Size, short12(e.Digest))
		}
	}
}

// publishEvidence stores bytes as the evaluator's result artifact.
func (g *global) publishEvidence(ctx context.Context, l *ledger.Ledger, objs *artifact.Store, actor, claimID, name, kind, schema string, r io.Reader, requestID string) (claim.Event, []ledger.Result, error) {
	content, size, err := objs.Put(ctx, r)
	if err != nil {
		return claim.Event{}, nil, err
	}
	id := "ev_" + strings.TrimPrefix(mintArtifactID(), "art_")
	res, err := l.SubmitClaim(ctx, claim.PublishArtifact{Claim: claimID, Artifact: id, Role: claim.RoleResult,
		Kind: kind, Schema: schema, Name: name, Content: content, Size: size}, ledger.WriteOptions{Actor: actor, RequestID: requestID})
	if err != nil {
		return claim.Event{}, nil, err
	}
	e, err := claim.Decode(res[0].Line)
	return e, res, err
}

func newCheckReport(g *global) *cobra.Command {
	var d checkDoc
	c := &cobra.Command{
		Use:   "report CHECK --claim C --artifact ID --result pass|fail|incomplete|error (--evidence ID | --evidence-file FILE) [--note TEXT] | report -",
		Short: "Report a verdict on one target with your evidence (designated evaluator); begins the attempt if none runs",
		Example: `  tally check report review --claim C17 --artifact patch-a --result fail --evidence-file review.md \
      --note "unchecked read after the escape" --as maintainer`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := d.load(g, args); err != nil {
				return err
			}
			if err := need("artifact", d.Artifact); err != nil {
				return err
			}
			switch claim.Result(d.Result) {
			case claim.Pass, claim.Fail, claim.Incomplete, claim.Error:
			default:
				return usagef("result: must be pass, fail, incomplete or error")
			}
			if (d.Evidence == "") == (d.EvidenceFile == "") {
				return usagef("evidence: give exactly one of --evidence ID and --evidence-file FILE")
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := g.guardTarget(c.Context(), l, &d, true); err != nil {
				return err
			}
			// Refuse a report the ledger would refuse before storing evidence.
			if err := g.precheckEvaluator(l, d.Claim, d.Check, actor); err != nil {
				return err
			}
			var all []ledger.Result
			if d.EvidenceFile != "" {
				objs, err := g.objects()
				if err != nil {
					return err
				}
				f, err := os.Open(g.abs(d.EvidenceFile))
				if err != nil {
					return usagef("evidence_file: %v", err)
				}
				ev, res, err := g.publishEvidence(c.Context(), l, objs, actor, d.Claim, filepath.Base(d.EvidenceFile), "evidence", "", f, d.RequestID)
				f.Close()
				if err != nil {
					return err
				}
				all = append(all, res...)
				d.Evidence, d.EvidenceDigest = ev.Artifact, ev.Digest
			}
			res, err := l.SubmitClaim(c.Context(), claim.ReportVerdict{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest,
				Result: claim.Result(d.Result), Evidence: d.Evidence, EvidenceDigest: d.EvidenceDigest, Note: d.Note}, ledger.WriteOptions{Actor: actor, RequestID: d.RequestID})
			if err != nil {
				return err
			}
			return g.printClaimWrite(l, d.Claim, append(all, res...), printCheckRecords)
		},
	}
	d.bindTarget(c)
	f := c.Flags()
	f.StringVar(&d.Result, "result", "", "pass, fail (conclusive), incomplete (conclusive: nothing to evaluate) or error (could not evaluate; retried)")
	f.StringVar(&d.Evidence, "evidence", "", "your result artifact's id (published with artifact put)")
	f.StringVar(&d.EvidenceDigest, "evidence-digest", "", "its digest (default: the recorded one)")
	f.StringVar(&d.EvidenceFile, "evidence-file", "", "store this file as your result artifact and cite it")
	f.StringVar(&d.Note, "note", "", "one line on why")
	return c
}

// precheckEvaluator refuses early (before anything is stored or run) an
// actor who is not the check's designated evaluator. The ledger checks it
// again under its lock.
func (g *global) precheckEvaluator(l *ledger.Ledger, claimID, check, actor string) error {
	v, err := g.claimView(l, claimID, g.io.Now())
	if err != nil {
		return err
	}
	ch, _ := attemptOn(&v, check, "")
	if ch == nil {
		return rule.NotFoundf("check", "claim "+claimID+" declares no check "+strconv.Quote(check))
	}
	if ch.Evaluator != actor {
		return rule.Forbiddenf("actor", "only the designated evaluator "+ch.Evaluator+" may run check "+check)
	}
	return nil
}

// defaultTarget picks the artifact bound to the check's slot in the latest
// received response testament on which the check has not concluded.
func defaultTarget(v *claim.View, check string) string {
	slot := ""
	for _, s := range v.Slots {
		for _, ch := range s.Checks {
			if ch.ID == check {
				slot = s.Name
			}
		}
	}
	for i := len(v.Testaments) - 1; i >= 0; i-- {
		t := v.Testaments[i]
		if t.Role != claim.TestamentResponse || t.State != "Received" {
			continue
		}
		for _, b := range t.Bindings {
			if b.Slot != slot {
				continue
			}
			if _, at := attemptOn(v, check, b.Artifact); at == nil || at.State == "running" || at.State == "pending" {
				return b.Artifact
			}
		}
	}
	return ""
}

func newCheckRun(g *global) *cobra.Command {
	var d checkDoc
	c := &cobra.Command{
		Use:   "run CHECK --claim C [--artifact ID] [--command CMD] [--timeout 10m] | run -",
		Short: "Run the check's validator on its target and record the verdict with the log as evidence (designated evaluator)",
		Long: "run materialises the target artifact into a temporary directory (its working directory; the file's path\n" +
			"is in TALLY_ARTIFACT), runs the validator the check names at its current handler, stores the validator's\n" +
			"log as your result artifact, and records begin and verdict. Validators: " + strings.Join(validate.Names(), ", ") + ".\n" +
			"  command       exit 0 → pass, other exit → fail, cannot start or timeout → error (needs --command)\n" +
			"  test-report   go test -json or JUnit XML (the artifact, or --command's stdout): any failed → fail,\n" +
			"                none passed → incomplete, else pass\n" +
			"Without --artifact, the target is the latest received binding of the check's slot not yet concluded.",
		Example: `  tally check run behavior --claim C17 --artifact patch-a --command 'grep -q fixed patch.txt' --as maintainer
  tally check run tests --claim C17 --artifact report-a --as maintainer`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := d.load(g, args); err != nil {
				return err
			}
			timeout := validate.DefaultTimeout
			if d.Timeout != "" {
				t, err := time.ParseDuration(d.Timeout)
				if err != nil || t <= 0 {
					return usagef("timeout: %q is not a positive duration (90s, 10m)", d.Timeout)
				}
				timeout = t
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			objs, err := g.objects()
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := g.precheckEvaluator(l, d.Claim, d.Check, actor); err != nil {
				return err
			}
			v, err := g.claimView(l, d.Claim, g.io.Now())
			if err != nil {
				return err
			}
			if d.Artifact == "" {
				if d.Artifact = defaultTarget(&v, d.Check); d.Artifact == "" {
					return usagef("artifact: no received target left for check %s; pass --artifact", d.Check)
				}
			}
			// Which validator runs: the current handler of the attempt on the
			// target (or the primary one for a first attempt).
			ch, at := attemptOn(&v, d.Check, d.Artifact)
			val := ch.Validator
			if at != nil {
				val = at.Validator
			}
			runner, ok := validate.Lookup(val.Name)
			if !ok {
				return usagef("validator: check %s names %q, which this tally cannot run (it runs %s); report its verdict with `tally check report`", d.Check, val.Name, strings.Join(validate.Names(), ", "))
			}
			if runner.Name() == "command" && strings.TrimSpace(d.Command) == "" {
				return usagef("command: required: check %s runs the command validator (exit 0 → pass)", d.Check)
			}
			a, ok := lookupArtifact(l, d.Claim, d.Artifact)
			if !ok {
				return rule.NotFoundf("artifact", "claim "+d.Claim+" has no artifact "+strconv.Quote(d.Artifact))
			}
			content, err := artifact.ParseContentDigest(a.Content)
			if err != nil {
				return err
			}
			// Materialise (verifying the bytes) before anything is appended.
			dir, err := os.MkdirTemp("", "tally-check-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			name := filepath.Base(a.Name)
			if name == "" || name == "." || name == "/" || strings.HasPrefix(name, ".") {
				name = a.Artifact
			}
			path := filepath.Join(dir, name)
			rc, err := objs.Open(c.Context(), content)
			if err != nil {
				return storeError("artifact "+a.Artifact, err)
			}
			err = writeVerified(path, rc)
			rc.Close()
			if err != nil {
				return storeError("artifact "+a.Artifact, err)
			}
			var all []ledger.Result
			if at == nil || at.State != "running" {
				res, err := l.SubmitClaim(c.Context(), claim.BeginCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}, ledger.WriteOptions{Actor: actor, RequestID: d.RequestID})
				if err != nil {
					return err
				}
				all = append(all, res...)
				if b, err := claim.Decode(res[0].Line); err == nil {
					val = b.Validator
				}
			}
			out := runner.Run(c.Context(), validate.Input{Dir: dir, Path: path, Command: d.Command, Timeout: timeout})
			logb := fmt.Appendf(nil, "tally check run: claim %s, check %s, artifact %s (digest %s), validator %s@%s (tally's %s@%s)\n",
				d.Claim, d.Check, a.Artifact, a.Digest, val.Name, val.Version, runner.Name(), runner.Version())
			if d.Command != "" {
				logb = fmt.Appendf(logb, "command: %s\n", d.Command)
			}
			logb = append(logb, "---\n"...)
			logb = append(logb, out.Log...)
			logb = fmt.Appendf(logb, "---\nverdict: %s (%s)\n", out.Result, out.Note)
			ev, res, err := g.publishEvidence(c.Context(), l, objs, actor, d.Claim, d.Check+".log", "validator-log", "text/plain", bytes.NewReader(logb), d.RequestID)
			if err != nil {
				return err
			}
			all = append(all, res...)
			note := d.Note
			if note == "" {
				note = out.Note
			}
			res, err = l.SubmitClaim(c.Context(), claim.ReportVerdict{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest,
				Result: out.Result, Evidence: ev.Artifact, EvidenceDigest: ev.Digest, Note: note}, ledger.WriteOptions{Actor: actor, RequestID: d.RequestID})
			if err != nil {
				return err
			}
			return g.printClaimWrite(l, d.Claim, append(all, res...), printCheckRecords)
		},
	}
	d.bindTarget(c)
	f := c.Flags()
	f.StringVar(&d.Command, "command", "", "the shell command (command validator), or the command printing the report (test-report)")
	f.StringVar(&d.Timeout, "timeout", "", "bound on the validator's command (default 10m)")
	f.StringVar(&d.Note, "note", "", "one line on the verdict (default: the validator's)")
	return c
}
