package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/zeebo/blake3"

	"tally/api"
	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/instant"
	"tally/ledger"
	"tally/rule"
	"tally/server"
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
// It is api.ClaimCheck and what only a local run can do.
type checkDoc struct {
	api.ClaimCheck
	EvidenceFile string `json:"evidence_file,omitempty"`
	Command      string `json:"command,omitempty"`
	Timeout      string `json:"timeout,omitempty"`
	RequestID    string `json:"request_id,omitempty"`
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
	return server.AttemptOn(v, check, art)
}

// checkStore is where check report and check run read the claim and write
// their records: the local ledger, or a server (TALLY_URL). One flow runs
// on either, so both print the same and refuse in the same order.
type checkStore interface {
	actor() string
	// view is the claim as it stands; an unknown claim is refused.
	view(ctx context.Context) (claim.View, error)
	// guard verifies the target's stored bytes before evidence about it is
	// stored or an attempt on it begins (see server.TargetToVerify).
	guard(ctx context.Context, v *claim.View, check, art string, onlyIfNew bool) error
	// materialise writes the target's verified bytes to path.
	materialise(ctx context.Context, a claim.ArtifactView, path string) error
	// reportWithEvidence stores r as the actor's result artifact and reports
	// v citing it, as one ledger write: a refused verdict leaves no evidence.
	reportWithEvidence(ctx context.Context, v claim.ReportVerdict, name, kind, schema string, r io.Reader) error
	// submit appends a check record and returns the first line appended.
	submit(ctx context.Context, cmd claim.Command, step string) ([]byte, error)
	// print prints every record written and the claim as it stands.
	print(human func(io.Writer, *claim.View, []ledger.Result)) error
	// replay prints the recorded answer of a retried request id and
	// reports whether it did, so a retry runs nothing again.
	replay() (bool, error)
	close()
}

// checkStore opens the store the check verbs use for claimID.
func (g *global) checkStore(c *cobra.Command, claimID, requestID string) (checkStore, error) {
	rc, err := g.remote()
	if err != nil {
		return nil, err
	}
	if rc != nil {
		actor, err := rc.identity(c.Context())
		if err != nil {
			return nil, err
		}
		return &remoteChecks{g: g, rc: rc, who: actor, claim: claimID, requestID: requestID}, nil
	}
	actor, err := g.requireActor("")
	if err != nil {
		return nil, err
	}
	l, objs, err := g.openWithObjects()
	if err != nil {
		return nil, err
	}
	return &localChecks{g: g, c: c, l: l, objs: objs, who: actor, claim: claimID, requestID: requestID}, nil
}

// localChecks is checkStore on the local ledger and content store.
type localChecks struct {
	g         *global
	c         *cobra.Command
	l         *ledger.Ledger
	objs      *artifact.Store
	who       string
	claim     string
	requestID string
	res       []ledger.Result
	answered  bool // the last write printed the verb's answer
}

func (b *localChecks) actor() string { return b.who }
func (b *localChecks) close()        { b.l.Close() }

func (b *localChecks) view(context.Context) (claim.View, error) {
	return b.g.claimView(b.l, b.claim, b.g.io.Now())
}

func (b *localChecks) guard(ctx context.Context, v *claim.View, check, art string, onlyIfNew bool) error {
	if a, ok := server.TargetToVerify(v, check, art, onlyIfNew); ok {
		return server.VerifyStored(ctx, b.objs, a)
	}
	return nil
}

func (b *localChecks) materialise(ctx context.Context, a claim.ArtifactView, path string) error {
	content, err := digest.ParseContentDigest(a.Content)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", a.Artifact, err)
	}
	return getLocal(ctx, b.objs, "artifact "+a.Artifact, content, path, nil)
}

func (b *localChecks) reportWithEvidence(ctx context.Context, v claim.ReportVerdict, name, kind, schema string, r io.Reader) error {
	content, size, err := b.objs.Put(ctx, r)
	if err != nil {
		return err
	}
	v.Publish = &claim.PublishArtifact{Claim: b.claim, Artifact: b.evidenceID(), Role: claim.RoleResult,
		Kind: kind, Schema: schema, Name: name, Content: content, Size: size}
	_, err = b.submit(ctx, v, "")
	return err
}

func (b *localChecks) submit(ctx context.Context, cmd claim.Command, step string) ([]byte, error) {
	var res []ledger.Result
	var err error
	if b.requestID == "" {
		res, err = b.l.SubmitClaim(ctx, cmd, ledger.WriteOptions{Actor: b.who, RequestID: b.requestID})
	} else {
		// Each step is idempotent under its own key, as over HTTP; the
		// verb's last write (step "") records and prints the answer for
		// all of them, so a retry prints it again.
		answer := func(*global, *ledger.State, []ledger.Result) error { return nil }
		if step == "" {
			answer = func(g *global, st *ledger.State, res []ledger.Result) error {
				v, _ := st.Claims.Claim(b.claim, g.io.Now().UTC())
				return g.printClaimView(&v, nil, append(slices.Clone(b.res), res...), printCheckRecords)
			}
			b.answered = true
		}
		res, err = b.g.write(b.c, b.l, ledger.Command{Claim: cmd}, b.who, stepKey(b.requestID, step), nil, answer)
	}
	if err != nil {
		b.answered = false
		return nil, err
	}
	b.res = append(b.res, res...)
	if len(res) == 0 { // a retry: the records were appended before
		return nil, nil
	}
	return res[0].Line, nil
}

func (b *localChecks) replay() (bool, error) {
	if b.requestID == "" {
		return false, nil
	}
	resp, ok, err := b.l.Recorded(&ledger.Idempotency{Principal: b.who, Key: b.requestID, Digest: b.g.requestDigest(b.c, nil)})
	if err != nil || !ok {
		return false, err
	}
	b.answered = true
	return true, b.g.printRecorded(resp)
}

func (b *localChecks) print(human func(io.Writer, *claim.View, []ledger.Result)) error {
	if b.answered {
		return nil
	}
	return b.g.printClaimWrite(b.l, b.claim, nil, b.res, human)
}

// remoteChecks is checkStore through a server, acting as the token's
// identity. Each write is one request; the requests' answers are printed
// as one, as the local ledger prints its records.
type remoteChecks struct {
	g         *global
	rc        *client
	who       string
	claim     string
	requestID string
	docs      [][]byte
}

func (b *remoteChecks) actor() string { return b.who }
func (b *remoteChecks) close()        {}

func (b *remoteChecks) view(ctx context.Context) (claim.View, error) {
	_, v, err := b.rc.claim(ctx, b.claim, b.g.io.Now())
	return v, err
}

// guard is the server's: it verifies the target's bytes before it appends
// a begin or a verdict, and before it stores a verdict's evidence, so asking
// it first would only hash them twice.
func (b *remoteChecks) guard(context.Context, *claim.View, string, string, bool) error { return nil }

func (b *remoteChecks) materialise(ctx context.Context, a claim.ArtifactView, path string) error {
	content, err := digest.ParseContentDigest(a.Content)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", a.Artifact, err)
	}
	return b.g.fetchContent(ctx, b.rc, b.rc.path(nil, "claims", b.claim, "artifacts", a.Artifact), "artifact "+a.Artifact, content, path)
}

// key is the Idempotency-Key of one step of the verb.
func (b *remoteChecks) key(step string) string { return stepKey(b.requestID, step) }

// stepKey is the request id of one step of a check verb: the request id
// itself for the verdict, ID/step for the others.
func stepKey(requestID, step string) string {
	if requestID == "" || step == "" {
		return requestID
	}
	return requestID + "/" + step
}

func (b *remoteChecks) reportWithEvidence(ctx context.Context, v claim.ReportVerdict, name, kind, schema string, r io.Reader) error {
	q := url.Values{"artifact": {v.Artifact}, "result": {string(v.Result)}, "evidence": {evidenceID(b.who, b.claim, b.requestID)},
		"kind": {kind}, "name": {name}}
	for k, val := range map[string]string{"digest": v.Digest, "note": v.Note, "schema": schema} {
		if val != "" {
			q.Set(k, val)
		}
	}
	doc, err := b.rc.exchange(ctx, "PUT", b.rc.path(q, "claims", b.claim, "checks", v.Check, "report"), r, "application/octet-stream", b.key(""))
	if err != nil {
		return err
	}
	b.docs = append(b.docs, doc)
	return nil
}

func (b *remoteChecks) submit(ctx context.Context, cmd claim.Command, step string) ([]byte, error) {
	doc, err := b.rc.postClaim(ctx, cmd, b.key(step))
	if err != nil {
		return nil, err
	}
	b.docs = append(b.docs, doc)
	return firstLine(doc)
}

// firstLine is the first record of a claim write document.
func firstLine(doc []byte) ([]byte, error) {
	m, err := members(doc)
	if err != nil {
		return nil, err
	}
	var recs []json.RawMessage
	if err := decodeMember(m, "records", &recs); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("server response: no record appended")
	}
	return recs[0], nil
}

// replay is the server's: each step's key is answered there.
func (b *remoteChecks) replay() (bool, error) { return false, nil }

func (b *remoteChecks) print(human func(io.Writer, *claim.View, []ledger.Result)) error {
	return b.g.printRemoteWrites(human, b.docs...)
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

func (b *localChecks) evidenceID() string { return evidenceID(b.who, b.claim, b.requestID) }

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
			b, err := g.checkStore(c, d.Claim, d.RequestID)
			if err != nil {
				return err
			}
			defer b.close()
			ctx := c.Context()
			v, err := b.view(ctx)
			if err != nil {
				return err
			}
			if err := b.guard(ctx, &v, d.Check, d.Artifact, false); err != nil {
				return err
			}
			if _, err := b.submit(ctx, claim.BeginCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}, ""); err != nil {
				return err
			}
			return b.print(printCheckRecords)
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
			// Refused before any evidence is stored, as the server would.
			if err := claim.CheckResult(claim.Result(d.Result)); err != nil {
				return err
			}
			if (d.Evidence == "") == (d.EvidenceFile == "") {
				return rule.Invalidf("evidence", "give exactly one of --evidence ID and --evidence-file FILE")
			}
			b, err := g.checkStore(c, d.Claim, d.RequestID)
			if err != nil {
				return err
			}
			defer b.close()
			ctx := c.Context()
			v, err := b.view(ctx)
			if err != nil {
				return err
			}
			if err := b.guard(ctx, &v, d.Check, d.Artifact, true); err != nil {
				return err
			}
			// Refuse a report the ledger would refuse before storing evidence.
			if err := evaluatorRefusal(&v, d.Check, b.actor()); err != nil {
				return err
			}
			verdict := d.Report()
			if d.EvidenceFile != "" {
				f, err := os.Open(g.abs(d.EvidenceFile))
				if err != nil {
					return usagef("evidence_file: %v", err)
				}
				err = b.reportWithEvidence(ctx, verdict, filepath.Base(d.EvidenceFile), "evidence", "", f)
				f.Close()
				if err != nil {
					return err
				}
			} else if _, err := b.submit(ctx, verdict, ""); err != nil {
				return err
			}
			return b.print(printCheckRecords)
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

// evaluatorRefusal refuses early (before anything is stored or run) an
// actor who is not the check's designated evaluator. The ledger checks it
// again under its lock. An ended claim is not refused here: the core still
// takes evidence and some verdicts after the end, for audit.
func evaluatorRefusal(v *claim.View, check, actor string) error {
	ch, _ := attemptOn(v, check, "")
	if ch == nil {
		return rule.NotFoundf("check", "claim "+v.Claim+" declares no check "+strconv.Quote(check))
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
				t, err := instant.ParseDuration("timeout", d.Timeout)
				if err != nil || t <= 0 {
					return usagef("timeout: %q is not a positive duration (90s, 10m)", d.Timeout)
				}
				timeout = t
			}
			b, err := g.checkStore(c, d.Claim, d.RequestID)
			if err != nil {
				return err
			}
			defer b.close()
			// A retry of a run already recorded prints its answer and runs
			// the validator no more.
			if done, err := b.replay(); err != nil || done {
				return err
			}
			ctx := c.Context()
			v, err := b.view(ctx)
			if err != nil {
				return err
			}
			if err := evaluatorRefusal(&v, d.Check, b.actor()); err != nil {
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
			a, ok := server.ViewArtifact(&v, d.Artifact)
			if !ok {
				return server.UnknownArtifact(d.Claim, d.Artifact)
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
			if err := b.materialise(ctx, a, path); err != nil {
				return err
			}
			if at == nil || at.State != "running" {
				line, err := b.submit(ctx, claim.BeginCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}, "begin")
				if err != nil {
					return err
				}
				if e, err := claim.Decode(line); err == nil {
					val = e.Validator
				}
			}
			out := runner.Run(ctx, validate.Input{Dir: dir, Path: path, Command: d.Command, Timeout: timeout})
			logb := fmt.Appendf(nil, "tally check run: claim %s, check %s, artifact %s (digest %s), validator %s@%s (tally's %s@%s)\n",
				d.Claim, d.Check, a.Artifact, a.Digest, val.Name, val.Version, runner.Name(), runner.Version())
			if d.Command != "" {
				logb = fmt.Appendf(logb, "command: %s\n", d.Command)
			}
			logb = append(logb, "---\n"...)
			logb = append(logb, out.Log...)
			logb = fmt.Appendf(logb, "---\nverdict: %s (%s)\n", out.Result, out.Note)
			note := d.Note
			if note == "" {
				note = out.Note
			}
			if err := b.reportWithEvidence(ctx, claim.ReportVerdict{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest,
				Result: out.Result, Note: note}, d.Check+".log", "validator-log", "text/plain", bytes.NewReader(logb)); err != nil {
				return err
			}
			return b.print(printCheckRecords)
		},
	}
	d.bindTarget(c)
	f := c.Flags()
	f.StringVar(&d.Command, "command", "", "the shell command (command validator), or the command printing the report (test-report)")
	f.StringVar(&d.Timeout, "timeout", "", "bound on the validator's command (default 10m)")
	f.StringVar(&d.Note, "note", "", "one line on the verdict (default: the validator's)")
	return c
}
