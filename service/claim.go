package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"tally/api"
	"tally/claim"
	"tally/digest"
)

// Claims is the claims family: claims, receipts, progress, testaments,
// artifacts and checks. Every write answers with the records it appended
// and the claim as the write left it; every rule is the claim core's,
// judged against c.Actor. The bytes of artifacts and evidence stream
// through as readers and are never held whole.
type Claims interface {
	// CreateClaim issues d as its claimant (c.Actor); a successor without
	// slots inherits its predecessor's, and the answer's notes say so.
	CreateClaim(ctx context.Context, c Call, d api.ClaimCreate) (ClaimWritten, error)
	// PostClaim makes a generated claim actionable, or records that
	// posting failed (d.Failed); the claimant's.
	PostClaim(ctx context.Context, c Call, d api.ClaimPost) (ClaimWritten, error)
	// CancelClaim ends the claim: Cancelled (the claimant).
	CancelClaim(ctx context.Context, c Call, d api.ClaimEnd) (ClaimWritten, error)
	// RevokeClaim withdraws the work from its holder: Revoked (the claimant).
	RevokeClaim(ctx context.Context, c Call, d api.ClaimEnd) (ClaimWritten, error)
	// SupersedeClaim ends the claim in favour of its successor (the claimant).
	SupersedeClaim(ctx context.Context, c Call, d api.ClaimSupersede) (ClaimWritten, error)
	// AcquireReceipt takes the execution receipt, or declines it
	// (d.Decline); the respondent's.
	AcquireReceipt(ctx context.Context, c Call, d api.ClaimReceipt) (ClaimWritten, error)
	// AdoptReceipt moves the receipt to a new holder (the claimant).
	AdoptReceipt(ctx context.Context, c Call, d api.ClaimAdopt) (ClaimWritten, error)
	// RecordProgress records progress under the receipt (its holder).
	RecordProgress(ctx context.Context, c Call, d api.ClaimProgress) (ClaimWritten, error)
	// CloseTestament closes the work cycle (the holder), records the
	// claimant's result testament, or one that could not be generated.
	CloseTestament(ctx context.Context, c Call, d api.ClaimTestament) (ClaimWritten, error)
	// PostTestament posts a closed testament (its author).
	PostTestament(ctx context.Context, c Call, d api.ClaimTestamentRef) (ClaimWritten, error)
	// ReceiveTestament receives a posted response testament (the claimant).
	ReceiveTestament(ctx context.Context, c Call, d api.ClaimTestamentRef) (ClaimWritten, error)
	// CommitDeadline commits a passed deadline: Expired, or Deadlocked for
	// a wait cycle's victim (the timekeeper).
	CommitDeadline(ctx context.Context, c Call, d api.ClaimRef) (ClaimWritten, error)
	// CommitDependency commits DependencyFailed when a dependency ended
	// unsatisfied (any participant; the fact is checked).
	CommitDependency(ctx context.Context, c Call, d api.ClaimRef) (ClaimWritten, error)
	// BeginCheck begins the next attempt of a check on one target (the
	// designated evaluator); the target's stored bytes are verified first.
	BeginCheck(ctx context.Context, c Call, d api.ClaimBegin) (ClaimWritten, error)
	// ReportCheck reports a verdict (the designated evaluator). With ev,
	// ev's bytes are stored as the evaluator's result artifact d.Evidence
	// and published in the verdict's own write, so a refused verdict
	// records no evidence; the target's bytes are verified before the
	// evidence is stored, unless an attempt on it already runs.
	ReportCheck(ctx context.Context, c Call, d api.ClaimCheck, ev *Evidence) (ClaimWritten, error)
	// PublishArtifact streams body into the content store and records the
	// artifact d describes; d.Name defaults to the artifact's id.
	PublishArtifact(ctx context.Context, c Call, d api.ClaimPublish, body io.Reader) (ClaimWritten, error)
	// ReceiveArtifact records that the claimant observed an artifact.
	ReceiveArtifact(ctx context.Context, c Call, d api.ClaimArtifactRef) (ClaimWritten, error)

	// Claim is one claim at c.Now, with why it is not satisfied
	// (View.Why); a missing one is a NotFound refusal.
	Claim(ctx context.Context, c Call, id string) (ClaimShown, error)
	// ListClaims is the claims f selects at c.Now, in creation order.
	ListClaims(ctx context.Context, c Call, f claim.Filter) (ClaimList, error)
	// ClaimGraph is every claim's state at c.Now and every relation
	// between claims.
	ClaimGraph(ctx context.Context, c Call) (ClaimGraph, error)

	// Artifact opens the bytes of artifact id of claim claimID, verified
	// against its recorded content: the body ends in a refusal (code
	// damaged) instead of io.EOF if they are not exactly that content.
	Artifact(ctx context.Context, c Call, claimID, id string) (ArtifactContent, error)
	// Content opens bytes by content digest, served only when an artifact
	// of the session records that content; verified as Artifact's are.
	Content(ctx context.Context, c Call, content digest.ContentDigest) (ArtifactContent, error)
	// ListArtifacts lists recorded artifacts and the custody of their
	// bytes: present or missing, or with q.Verify each stored copy
	// re-hashed (ok, missing, damaged). Bad copies are rows, not errors.
	ListArtifacts(ctx context.Context, c Call, q ArtifactQuery) (ArtifactList, error)
	// VerifyArtifact re-hashes one artifact's stored copy: its row when
	// intact, else the refusal reading its bytes would give.
	VerifyArtifact(ctx context.Context, c Call, claimID, id string) (ArtifactList, error)
}

// The claim writes' names, what a request id is bound to with the
// document (a verdict with evidence and one citing evidence already
// published have documents of their own).
const (
	MethodCreateClaim      = "CreateClaim"
	MethodPostClaim        = "PostClaim"
	MethodCancelClaim      = "CancelClaim"
	MethodRevokeClaim      = "RevokeClaim"
	MethodSupersedeClaim   = "SupersedeClaim"
	MethodAcquireReceipt   = "AcquireReceipt"
	MethodAdoptReceipt     = "AdoptReceipt"
	MethodRecordProgress   = "RecordProgress"
	MethodCloseTestament   = "CloseTestament"
	MethodPostTestament    = "PostTestament"
	MethodReceiveTestament = "ReceiveTestament"
	MethodCommitDeadline   = "CommitDeadline"
	MethodCommitDependency = "CommitDependency"
	MethodBeginCheck       = "BeginCheck"
	MethodReportCheck      = "ReportCheck"
	MethodPublishArtifact  = "PublishArtifact"
	MethodReceiveArtifact  = "ReceiveArtifact"
)

// ClaimWritten is a claim write's outcome: the response document
// ({"records":[…],"claim":VIEW,"notes":[…]}), the records appended (none
// on a replay), the claim as the write left it, and the notes.
type ClaimWritten struct {
	Doc
	Records []ClaimRecord
	Claim   claim.View
	Notes   []string
}

// ClaimRecord is one record a claim write appended: its type and its line
// as the log holds it.
type ClaimRecord struct {
	Type string
	Line []byte
}

// Evidence is the bytes a verdict cites, stored and published with it.
// Kind defaults to "evidence" and Name to the evidence's id.
type Evidence struct {
	Name, Kind, Schema string
	Body               io.Reader
}

// ClaimShown is one claim at Now.
type ClaimShown struct {
	Doc
	Now   time.Time
	Claim claim.View
	// Custody is each artifact's custody on a cluster (its "custody"
	// member); none on a single server.
	Custody []ArtifactCustody
}

// ClaimList is the claims a filter selected at Now.
type ClaimList struct {
	Doc
	Now    time.Time
	Claims []claim.Summary
}

// ClaimGraph is every claim (its state) and every relation between claims.
type ClaimGraph struct {
	Doc
	Claims []claim.Summary
	Edges  []claim.Edge
}

// ArtifactQuery selects the artifacts ListArtifacts lists: the api read
// document.
type ArtifactQuery = api.ArtifactQuery

// ArtifactList is the rows of ListArtifacts and VerifyArtifact.
type ArtifactList struct {
	Doc
	Artifacts []claim.StoredArtifact
}

// ArtifactContent is an artifact's bytes as they stream: Body must be read
// to io.EOF (which proves the bytes are Content's) and closed. Artifact is
// the recorded artifact; asked by content, one recording that content (of
// which a client knows the digest, the content and the size alone).
type ArtifactContent struct {
	Artifact *claim.ArtifactView
	Content  digest.ContentDigest
	Body     io.ReadCloser
	// Checked says the whole content was verified before Body's first
	// byte (a local store's copy), so a reader may pass bytes on as they
	// come; else (bytes in transit) only once Body reached io.EOF.
	Checked bool
}

// ReadClaimWritten reads a claim write's document into its typed result.
func ReadClaimWritten(d Doc) (ClaimWritten, error) {
	var m struct {
		Records []json.RawMessage `json:"records"`
		Claim   claim.View        `json:"claim"`
		Notes   []string          `json:"notes"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ClaimWritten{}, fmt.Errorf("claim write document: %w", err)
	}
	out := ClaimWritten{Doc: d, Claim: m.Claim, Notes: m.Notes}
	for _, l := range m.Records {
		var t struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(l, &t); err != nil {
			return ClaimWritten{}, fmt.Errorf("claim write document: record: %w", err)
		}
		out.Records = append(out.Records, ClaimRecord{Type: t.Type, Line: l})
	}
	return out, nil
}

// ReadClaimShown reads a claim's document ({"now":…,"claim":…}).
func ReadClaimShown(d Doc) (ClaimShown, error) {
	var m struct {
		Now     time.Time         `json:"now"`
		Claim   claim.View        `json:"claim"`
		Custody []ArtifactCustody `json:"custody"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ClaimShown{}, fmt.Errorf("claim document: %w", err)
	}
	return ClaimShown{Doc: d, Now: m.Now, Claim: m.Claim, Custody: m.Custody}, nil
}

// ReadClaimList reads a claim listing's document ({"now":…,"claims":[…]}).
func ReadClaimList(d Doc) (ClaimList, error) {
	var m struct {
		Now    time.Time       `json:"now"`
		Claims []claim.Summary `json:"claims"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ClaimList{}, fmt.Errorf("claims document: %w", err)
	}
	return ClaimList{Doc: d, Now: m.Now, Claims: m.Claims}, nil
}

// ReadClaimGraph reads the claim graph's document.
func ReadClaimGraph(d Doc) (ClaimGraph, error) {
	var m struct {
		Claims []claim.Summary `json:"claims"`
		Edges  []claim.Edge    `json:"edges"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ClaimGraph{}, fmt.Errorf("claim graph document: %w", err)
	}
	return ClaimGraph{Doc: d, Claims: m.Claims, Edges: m.Edges}, nil
}

// ReadArtifactList reads an artifact listing's document.
func ReadArtifactList(d Doc) (ArtifactList, error) {
	var m struct {
		Artifacts []claim.StoredArtifact `json:"artifacts"`
	}
	if err := json.Unmarshal(d.JSON, &m); err != nil {
		return ArtifactList{}, fmt.Errorf("artifacts document: %w", err)
	}
	return ArtifactList{Doc: d, Artifacts: m.Artifacts}, nil
}
