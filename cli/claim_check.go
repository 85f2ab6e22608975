package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/zeebo/blake3"

	"tally/api"
	"tally/checkrun"
	"tally/claim"
	"tally/instant"
	"tally/refuse"
	"tally/service"
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
// It is api.ClaimCheck and what only a local run can do.
type checkDoc struct {
	api.ClaimCheck
	EvidenceFile string `json:"evidence_file,omitempty"`
	Command      string `json:"command,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
	WithRequestID
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

// loadTarget is load for a verb on one target: the artifact is required.
func (d *checkDoc) loadTarget(g *global, args []string) error {
	if err := d.load(g, args); err != nil {
		return err
	}
	return need("artifact", d.Artifact)
}

func (d *checkDoc) bindTarget(c *cobra.Command) {
	c.Flags().StringVar(&d.Claim, "claim", "", "the claim")
	c.Flags().StringVar(&d.Artifact, "artifact", "", "the target artifact's id")
	c.Flags().StringVar(&d.Digest, "digest", "", "the target's artifact digest (default: the recorded one)")
	d.requestIDFlag(c.Flags())
}

// stepKey is the request id of one step of a check verb: the request id
// itself for the verdict, ID/step for the others.
func stepKey(requestID, step string) string {
	if requestID == "" || step == "" {
		return requestID
	}
	return requestID + "/" + step
}

// mintEvidenceID returns a fresh evidence artifact id: ev_ and 8 hex digits.
func mintEvidenceID() string { return "ev_" + strings.TrimPrefix(mintArtifactID(), "art_") }

// evidenceID is the id of the evidence a verdict publishes: derived from
// the request id when there is one, so a retry names the same artifact,
// else fresh.
func evidenceID(who, claimID, requestID string) string {
	if requestID == "" {
		return mintEvidenceID()
	}
	sum := blake3.Sum256([]byte("tally evidence id\n" + who + "\n" + claimID + "\n" + requestID))
	return "ev_" + hex.EncodeToString(sum[:4])
}

func newCheckBegin(g *global) *cobra.Command {
	var d checkDoc
	c := &cobra.Command{
		Use:     "begin CHECK --claim C --artifact ID [--digest D] | begin -",
		Short:   "Begin the next attempt of a check on one target (designated evaluator); its bytes are verified first",
		Example: `  tally check begin behavior --claim C17 --artifact patch-a --as maintainer`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := d.loadTarget(g, args); err != nil {
				return err
			}
			// The service verifies the target's stored bytes first.
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				return svc.BeginCheck(c.Context(), call, d.begin())
			}, printCheckRecords)
		},
	}
	d.bindTarget(c)
	return c
}

func printCheckRecords(w io.Writer, _ *claim.View, res []service.ClaimRecord) {
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

func newCheckReport(g *global) *cobra.Command {
	var d checkDoc
	c := &cobra.Command{
		Use:   "report CHECK --claim C --artifact ID --result pass|fail|incomplete|error (--evidence ID | --evidence-file FILE) [--note TEXT] | report -",
		Short: "Report a verdict on one target with your evidence (designated evaluator); begins the attempt if none runs",
		Example: `  tally check report review --claim C17 --artifact patch-a --result fail --evidence-file review.md \
      --note "unchecked read after the escape" --as maintainer`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if err := d.loadTarget(g, args); err != nil {
				return err
			}
			// Refused before any evidence is stored, as the server would.
			if err := claim.CheckResult(claim.Result(d.Result)); err != nil {
				return err
			}
			if (d.Evidence == "") == (d.EvidenceFile == "") {
				return refuse.Invalidf("evidence", "give exactly one of --evidence ID and --evidence-file FILE")
			}
			// A report the ledger would refuse is refused before any
			// evidence is stored.
			ctx := c.Context()
			svc, call, _, err := g.evaluatorWriter(ctx, &d)
			if err != nil {
				return err
			}
			var w service.ClaimWritten
			if d.EvidenceFile != "" {
				f, err := os.Open(g.abs(d.EvidenceFile))
				if err != nil {
					return usagef("evidence_file: %v", err)
				}
				defer f.Close()
				// The service verifies the target's bytes before it stores
				// the evidence, and publishes it in the verdict's write.
				r := d.ClaimCheck
				r.Evidence = evidenceID(call.Actor, d.Claim, d.RequestID)
				w, err = svc.ReportCheck(ctx, call, r, &service.Evidence{Name: filepath.Base(d.EvidenceFile), Kind: "evidence", Body: f})
				if err != nil {
					return err
				}
			} else if w, err = svc.ReportCheck(ctx, call, d.ClaimCheck, nil); err != nil {
				return err
			}
			return g.printClaimWrites(printCheckRecords, w)
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

// evaluatorWriter is the Service and the Call a check verb writes with,
// and the claim as it stands, once the acting identity is known to be the
// check's designated evaluator (evaluatorRefusal).
func (g *global) evaluatorWriter(ctx context.Context, d *checkDoc) (cliService, service.Call, *claim.View, error) {
	svc, call, err := g.claimWriter(d.RequestID)
	if err != nil {
		return nil, call, nil, err
	}
	shown, err := svc.Claim(ctx, g.asRead(call), d.Claim)
	if err != nil {
		return nil, call, nil, err
	}
	if err := evaluatorRefusal(&shown.Claim, d.Check, call.Actor); err != nil {
		return nil, call, nil, err
	}
	return svc, call, &shown.Claim, nil
}

// asRead is the Call of a read a write verb makes first: the claim as it
// stands now, under no request id.
func (g *global) asRead(c service.Call) service.Call {
	c.RequestID, c.Now = "", g.io.Now()
	return c
}

// evaluatorRefusal refuses early (before anything is stored or run) an
// actor who is not the check's designated evaluator. The ledger checks it
// again under its lock. An ended claim is not refused here: the core still
// takes evidence and some verdicts after the end, for audit.
func evaluatorRefusal(v *claim.View, check, actor string) error {
	ch, _ := v.AttemptOn(check, "")
	if ch == nil {
		return refuse.NotFoundf("check", "claim "+v.Claim+" declares no check "+strconv.Quote(check))
	}
	if ch.Evaluator != actor {
		return refuse.Forbiddenf("actor", "only the designated evaluator "+ch.Evaluator+" may run check "+check)
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
			if _, at := v.AttemptOn(check, b.Artifact); at == nil || at.State == "running" || at.State == "pending" {
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
			"log as your result artifact, and records begin and verdict. Validators: " + strings.Join(checkrun.Names(), ", ") + ".\n" +
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
			timeout := checkrun.DefaultTimeout
			if d.Timeout != "" {
				t, err := instant.ParseDuration("timeout", d.Timeout)
				if err != nil || t <= 0 {
					return usagef("timeout: %q is not a positive duration (90s, 10m)", d.Timeout)
				}
				timeout = t
			}
			return g.checkRun(c, &d, timeout)
		},
	}
	d.bindTarget(c)
	f := c.Flags()
	f.StringVar(&d.Command, "command", "", "the shell command (command validator), or the command printing the report (test-report)")
	f.StringVar(&d.Timeout, "timeout", "", "bound on the validator's command (default 10m)")
	f.StringVar(&d.Note, "note", "", "one line on the verdict (default: the validator's)")
	return c
}

// begin is the document of the begin the check verbs write.
func (d *checkDoc) begin() api.ClaimBegin {
	return api.ClaimBegin{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}
}

// checkRun is check run: the validator runs here, on this machine, and
// the begin (request id KEY/begin) and the verdict with the validator's
// log as evidence (KEY) are written through the service, so a retry
// replays each step.
func (g *global) checkRun(c *cobra.Command, d *checkDoc, timeout time.Duration) error {
	ctx := c.Context()
	svc, call, v, err := g.evaluatorWriter(ctx, d)
	if err != nil {
		return err
	}
	// A retry of a run already recorded replays it: the validator runs no
	// more.
	evidence := evidenceID(call.Actor, d.Claim, d.RequestID)
	recorded, done := runRecorded(v, d.Check, evidence, d.RequestID)
	if done {
		d.Artifact = recorded.target
	}
	if d.Artifact == "" {
		if d.Artifact = defaultTarget(v, d.Check); d.Artifact == "" {
			return usagef("artifact: no received target left for check %s; pass --artifact", d.Check)
		}
	}
	// Which validator runs: the current handler of the attempt on the
	// target (or the primary one for a first attempt).
	ch, at := v.AttemptOn(d.Check, d.Artifact)
	val := ch.Validator
	if at != nil {
		val = at.Validator
	}
	runner, ok := checkrun.Lookup(val.Name)
	if !ok {
		return usagef("validator: check %s names %q, which this tally cannot run (it runs %s); report its verdict with `tally check report`", d.Check, val.Name, strings.Join(checkrun.Names(), ", "))
	}
	if runner.Name() == "command" && strings.TrimSpace(d.Command) == "" {
		return usagef("command: required: check %s runs the command validator (exit 0 → pass)", d.Check)
	}
	a, ok := v.FindArtifact(d.Artifact)
	if !ok {
		return claim.UnknownArtifact(d.Claim, d.Artifact)
	}
	step := func(name string) service.Call {
		s := call
		s.RequestID = stepKey(d.RequestID, name)
		return s
	}
	var ws []service.ClaimWritten
	begin := func() error {
		if at != nil && at.State == "running" {
			return nil
		}
		w, err := svc.BeginCheck(ctx, step("begin"), d.begin())
		if err != nil {
			return err
		}
		if len(w.Records) > 0 {
			if e, err := claim.Decode(w.Records[0].Line); err == nil {
				val = e.Validator
			}
		}
		ws = append(ws, w)
		return nil
	}
	report := func(result claim.Result, note string, log io.Reader) error {
		r := api.ClaimCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest, Result: string(result), Note: note, Evidence: evidence}
		w, err := svc.ReportCheck(ctx, step(""), r, &service.Evidence{Name: d.Check + ".log", Kind: "validator-log", Schema: "text/plain", Body: log})
		if err != nil {
			return err
		}
		ws = append(ws, w)
		return g.printClaimWrites(printCheckRecords, ws...)
	}
	if done {
		head := runHeader(d, a, val, runner)
		log, err := g.recordedLog(ctx, svc, call, d.Claim, evidence, head)
		if err != nil {
			return err
		}
		defer log.Close()
		if err := begin(); err != nil {
			return err
		}
		return report(recorded.result.Result, recorded.result.Note, log)
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
	content, err := svc.Artifact(ctx, g.asRead(call), d.Claim, a.Artifact)
	if err != nil {
		return err
	}
	err = writeVerified(path, content.Body)
	content.Body.Close()
	if err != nil {
		return err
	}
	if err := begin(); err != nil {
		return err
	}
	out := runner.Run(ctx, checkrun.Input{Dir: dir, Path: path, Command: d.Command, Timeout: timeout})
	logb := runHeader(d, a, val, runner)
	logb = append(logb, out.Log...)
	logb = fmt.Appendf(logb, "---\nverdict: %s (%s)\n", out.Result, out.Note)
	note := d.Note
	if note == "" {
		note = out.Note
	}
	return report(out.Result, note, bytes.NewReader(logb))
}

// runHeader is what a run's log says before the validator's output: what
// ran on what. A retry with the same request id must say the same.
func runHeader(d *checkDoc, a claim.ArtifactView, val claim.Validator, runner checkrun.Validator) []byte {
	b := fmt.Appendf(nil, "tally check run: claim %s, check %s, artifact %s (digest %s), validator %s@%s (tally's %s@%s)\n",
		d.Claim, d.Check, a.Artifact, a.Digest, val.Name, val.Version, runner.Name(), runner.Version())
	if d.Command != "" {
		b = fmt.Appendf(b, "command: %s\n", d.Command)
	}
	return append(b, "---\n"...)
}

// recordedRun is what the view records of a run under a request id: the
// verdict citing the evidence the id names, and its target.
type recordedRun struct {
	target string
	result claim.AttemptResult
}

// runRecorded finds the verdict of check citing evidence (the id a run
// under requestID publishes its log as).
func runRecorded(v *claim.View, check, evidence, requestID string) (recordedRun, bool) {
	if requestID == "" {
		return recordedRun{}, false
	}
	ch, _ := v.AttemptOn(check, "")
	if ch == nil {
		return recordedRun{}, false
	}
	for _, t := range ch.Targets {
		for _, r := range t.Results {
			if r.Evidence == evidence {
				return recordedRun{target: t.Artifact, result: r}, true
			}
		}
	}
	return recordedRun{}, false
}

// recordedLog opens the log a recorded run published as its evidence, to
// send again, after checking that it records a run of the same command on
// the same target (head): else the request id was used for another run.
func (g *global) recordedLog(ctx context.Context, svc cliService, call service.Call, claimID, evidence string, head []byte) (io.ReadCloser, error) {
	ac, err := svc.Artifact(ctx, g.asRead(call), claimID, evidence)
	if err != nil {
		return nil, err
	}
	got := make([]byte, len(head))
	_, err = io.ReadFull(ac.Body, got)
	if err == nil && !bytes.Equal(got, head) || err == io.EOF || err == io.ErrUnexpectedEOF {
		err = &service.IdempotencyError{Code: service.CodeIdempotencyConflict, Key: call.RequestID}
	}
	if err != nil {
		ac.Body.Close()
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(got), ac.Body), ac.Body}, nil
}
