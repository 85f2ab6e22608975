package api

import (
	"time"

	"tally/claim"
	"tally/promise"
	"tally/refuse"
)

// The claim family's documents. Each is what `tally … -` reads on stdin
// (the CLI adds request_id, which the REST API takes as Idempotency-Key),
// the body of the verb's route (the path's members, "claim" from {id}, set
// over the body's) and an A2A claim record (with "action"). Members are the
// claim core's names, snake_case.

// ClaimCreate is the document of claim create.
type ClaimCreate struct {
	Claim        string           `json:"claim"`
	Claimant     string           `json:"claimant,omitempty"`   // the acting identity when given
	Respondent   string           `json:"respondent,omitempty"` // none: posted to a pool
	Work         string           `json:"work"`
	Scope        string           `json:"scope,omitempty"`
	MaxResponses int              `json:"max_responses,omitempty"`
	Deadline     string           `json:"deadline,omitempty"` // RFC 3339, or a duration from now
	DependsOn    []string         `json:"depends_on,omitempty"`
	Awaits       []string         `json:"awaits,omitempty"`
	Reviews      []string         `json:"reviews,omitempty"`
	DerivedFrom  []string         `json:"derived_from,omitempty"`
	Predecessor  string           `json:"predecessor,omitempty"`
	Slots        []claim.SlotSpec `json:"slots"`
	NoChecks     bool             `json:"no_checks,omitempty"` // no slots on purpose (else a successor without slots inherits its predecessor's)
	// Without a respondent the claim is posted to a pool: pool names the
	// seats that may take it (none: any seat); the first to acquire the
	// receipt becomes the respondent.
	Pool     []string `json:"pool,omitempty"`
	Priority *int     `json:"priority,omitempty"` // 0 (highest) to 4; default 2
}

// Command is the create command; a relative deadline counts from now.
func (d *ClaimCreate) Command(now time.Time) (claim.Command, error) {
	cmd := claim.Create{Claim: d.Claim, Claimant: d.Claimant, Respondent: d.Respondent, Work: d.Work, Scope: d.Scope,
		MaxResponses: d.MaxResponses, DependsOn: d.DependsOn, Awaits: d.Awaits, Reviews: d.Reviews,
		DerivedFrom: d.DerivedFrom, Predecessor: d.Predecessor, Slots: d.Slots, NoChecks: d.NoChecks,
		Pool: d.Pool, Priority: d.Priority}
	if d.Deadline == "" {
		return cmd, nil
	}
	t, err := promise.ParseDeadline("deadline", d.Deadline, now)
	if err != nil {
		return nil, err
	}
	cmd.Deadline = t
	return cmd, nil
}

// ClaimPost is the document of claim post: posted, or posting failed.
type ClaimPost struct {
	Claim  string `json:"claim"`
	Failed bool   `json:"failed,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (d *ClaimPost) Command() claim.Command {
	if d.Failed {
		return claim.ReportPostFailure{Claim: d.Claim, Reason: d.Reason}
	}
	return claim.Post{Claim: d.Claim}
}

// ClaimEnd is the document of claim cancel and claim revoke.
type ClaimEnd struct {
	Claim  string `json:"claim"`
	Reason string `json:"reason,omitempty"`
}

func (d *ClaimEnd) Cancel() claim.Command { return claim.Cancel{Claim: d.Claim, Reason: d.Reason} }
func (d *ClaimEnd) Revoke() claim.Command { return claim.Revoke{Claim: d.Claim, Reason: d.Reason} }

// ClaimSupersede is the document of claim supersede.
type ClaimSupersede struct {
	Claim     string `json:"claim"`
	Successor string `json:"successor"`
	Reason    string `json:"reason,omitempty"`
}

func (d *ClaimSupersede) Command() claim.Command {
	return claim.Supersede{Claim: d.Claim, Successor: d.Successor, Reason: d.Reason}
}

// ClaimReceipt is the document of receipt acquire: taken, or declined.
type ClaimReceipt struct {
	Claim   string `json:"claim"`
	Decline bool   `json:"decline,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

func (d *ClaimReceipt) Command() claim.Command {
	if d.Decline {
		return claim.DeclineReceipt{Claim: d.Claim, Reason: d.Reason}
	}
	return claim.AcquireReceipt{Claim: d.Claim}
}

// ClaimAdopt is the document of receipt adopt.
type ClaimAdopt struct {
	Claim  string `json:"claim"`
	Holder string `json:"holder"`
	Reason string `json:"reason,omitempty"`
}

func (d *ClaimAdopt) Command() claim.Command {
	return claim.Adopt{Claim: d.Claim, Holder: d.Holder, Reason: d.Reason}
}

// ClaimProgress is the document of progress.
type ClaimProgress struct {
	Claim      string `json:"claim"`
	Generation uint64 `json:"generation"`
	Note       string `json:"note"`
}

func (d *ClaimProgress) Command() claim.Command {
	return claim.Progress{Claim: d.Claim, Generation: d.Generation, Note: d.Note}
}

// ClaimTestament is the document of testament close: the holder's response
// testament (role response, the default), the claimant's result testament,
// or one that could not be generated (failed).
type ClaimTestament struct {
	Claim       string          `json:"claim"`
	Testament   string          `json:"testament"`
	Role        string          `json:"role,omitempty"` // response (default) | result
	Generation  uint64          `json:"generation,omitempty"`
	Outcome     string          `json:"outcome,omitempty"`
	Summary     string          `json:"summary,omitempty"`
	Confidence  *float64        `json:"confidence,omitempty"`
	Bindings    []claim.Binding `json:"bindings,omitempty"`
	Diagnostics []claim.Ref     `json:"diagnostics,omitempty"`
	Results     []claim.Ref     `json:"results,omitempty"`
	Failed      bool            `json:"failed,omitempty"`
	Reason      string          `json:"reason,omitempty"`
}

func (d *ClaimTestament) Command() (claim.Command, error) {
	switch {
	case d.Failed:
		return claim.FailTestament{Claim: d.Claim, Generation: d.Generation, Reason: d.Reason}, nil
	case d.Role == claim.TestamentResult:
		return claim.ResultTestament{Claim: d.Claim, Testament: d.Testament, Summary: d.Summary, Confidence: d.Confidence, Results: d.Results}, nil
	case d.Role != "" && d.Role != claim.TestamentResponse:
		return nil, refuse.Invalidf("role", "must be response or result")
	}
	return claim.CloseTestament{Claim: d.Claim, Testament: d.Testament, Generation: d.Generation, Outcome: claim.Outcome(d.Outcome),
		Summary: d.Summary, Confidence: d.Confidence, Bindings: d.Bindings, Diagnostics: d.Diagnostics}, nil
}

// ClaimTestamentRef is the document of testament post and testament receive.
type ClaimTestamentRef struct {
	Claim     string `json:"claim"`
	Testament string `json:"testament"`
}

func (d *ClaimTestamentRef) Post() claim.Command {
	return claim.PostTestament{Claim: d.Claim, Testament: d.Testament}
}

func (d *ClaimTestamentRef) Receive() claim.Command {
	return claim.ReceiveTestament{Claim: d.Claim, Testament: d.Testament}
}

// ClaimRef is the document of the verbs that name only a claim: the
// deadline and dependency facts.
type ClaimRef struct {
	Claim string `json:"claim"`
}

// ClaimBegin is the document of check begin over HTTP and A2A.
type ClaimBegin struct {
	Claim    string `json:"claim"`
	Check    string `json:"check"`
	Artifact string `json:"artifact"`
	Digest   string `json:"digest,omitempty"`
}

func (d *ClaimBegin) Command() claim.Command {
	return claim.BeginCheck{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest}
}

// ClaimCheck is the document of check begin and check report, without what
// only a local run can do (the CLI adds evidence_file, command, timeout):
// evidence over HTTP is an artifact PUT first.
type ClaimCheck struct {
	Check          string `json:"check"`
	Claim          string `json:"claim"`
	Artifact       string `json:"artifact,omitempty"`
	Digest         string `json:"digest,omitempty"`
	Result         string `json:"result,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	EvidenceDigest string `json:"evidence_digest,omitempty"`
	Note           string `json:"note,omitempty"`
}

// Report is the verdict command.
func (d *ClaimCheck) Report() claim.ReportVerdict {
	return claim.ReportVerdict{Claim: d.Claim, Check: d.Check, Artifact: d.Artifact, Digest: d.Digest,
		Result: claim.Result(d.Result), Evidence: d.Evidence, EvidenceDigest: d.EvidenceDigest, Note: d.Note}
}

// ClaimPublish is the document of an artifact's description; its bytes
// travel beside it (a file part over A2A, the body of a PUT).
type ClaimPublish struct {
	Claim      string `json:"claim"`
	Artifact   string `json:"artifact"`
	Role       string `json:"role,omitempty"`
	Slot       string `json:"slot,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Schema     string `json:"schema,omitempty"`
	Name       string `json:"name,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
}

func (d *ClaimPublish) Command() claim.PublishArtifact {
	return claim.PublishArtifact{Claim: d.Claim, Artifact: d.Artifact, Role: claim.Role(d.Role), Slot: d.Slot, Kind: d.Kind,
		Schema: d.Schema, Name: d.Name, Generation: d.Generation}
}

// ClaimArtifactRef is the document of artifact receive.
type ClaimArtifactRef struct {
	Claim    string `json:"claim"`
	Artifact string `json:"artifact"`
	Digest   string `json:"digest,omitempty"`
}

func (d *ClaimArtifactRef) Command() claim.Command {
	return claim.ReceiveArtifact{Claim: d.Claim, Artifact: d.Artifact, Digest: d.Digest}
}

// ClaimActions are the claim verbs by the names A2A metadata's "action" and
// the REST routes use, create (the default) first. A fresh table each call:
// nothing here is shared mutable state.
func ClaimActions() Actions[claim.Command] {
	type cmd = claim.Command
	return Actions[claim.Command]{
		verb("create", func(d *ClaimCreate, now time.Time) (cmd, error) { return d.Command(now) }),
		verb("post", func(d *ClaimPost, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("cancel", func(d *ClaimEnd, _ time.Time) (cmd, error) { return d.Cancel(), nil }),
		verb("revoke", func(d *ClaimEnd, _ time.Time) (cmd, error) { return d.Revoke(), nil }),
		verb("supersede", func(d *ClaimSupersede, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("receipt.acquire", func(d *ClaimReceipt, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("receipt.adopt", func(d *ClaimAdopt, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("progress", func(d *ClaimProgress, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("testament.close", func(d *ClaimTestament, _ time.Time) (cmd, error) { return d.Command() }),
		verb("testament.post", func(d *ClaimTestamentRef, _ time.Time) (cmd, error) { return d.Post(), nil }),
		verb("testament.receive", func(d *ClaimTestamentRef, _ time.Time) (cmd, error) { return d.Receive(), nil }),
		verb("deadline.commit", func(d *ClaimRef, _ time.Time) (cmd, error) { return claim.CommitDeadline{Claim: d.Claim}, nil }),
		verb("dependency.commit", func(d *ClaimRef, _ time.Time) (cmd, error) { return claim.CommitDependency{Claim: d.Claim}, nil }),
		verb("check.begin", func(d *ClaimBegin, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("check.report", func(d *ClaimCheck, _ time.Time) (cmd, error) { return d.Report(), nil }),
		verb("artifact.publish", func(d *ClaimPublish, _ time.Time) (cmd, error) { return d.Command(), nil }),
		verb("artifact.receive", func(d *ClaimArtifactRef, _ time.Time) (cmd, error) { return d.Command(), nil }),
	}
}
