package cluster

import (
	"context"
	"errors"
	"io"

	"tally/api"
	"tally/claim"
	"tally/cluster/replica"
	"tally/digest"
	"tally/ledgerservice"
	"tally/refuse"
	"tally/service"
	"tally/verb"
)

// The claims family through a node. A write is proposed like any other;
// one carrying bytes stores them here first, and its command names them
// (service_upload.go). A check's
// target is verified here, at the proposer, against this replica's copy,
// and the replicas append the check without reading bytes
// (ledgerservice.Config.TargetsVerified): whether a replica's disk holds a
// whole copy must not change what it decides.

var _ service.Claims = (*Node)(nil)

// bytesMethods are the commands of the writes that carry bytes, which a
// replica runs with the bytes staged for them (service_upload.go).
func bytesMethods(sm func() *replica.SM) map[string]replica.Method {
	return map[string]replica.Method{
		verb.MethodReportEvidence: bytesMethod(sm, func(s service.Service, ctx context.Context, call service.Call, d verb.Evidence, body io.Reader) (service.ClaimWritten, error) {
			return s.ReportCheck(ctx, call, d.Check, &service.Evidence{Name: d.Name, Kind: d.Kind, Schema: d.Schema, Body: body})
		}),
		service.MethodPublishArtifact: bytesMethod(sm, service.Service.PublishArtifact),
	}
}

// claimWrite proposes a claim write of method name with document d.
func claimWrite[D any](ctx context.Context, c *Node, name string, call service.Call, d D) (service.ClaimWritten, error) {
	return write[D, service.ClaimWritten](ctx, c, name, call, d)
}

// CreateClaim issues d; a relative deadline is read at the command's
// instant, the same on every replica.
func (c *Node) CreateClaim(ctx context.Context, call service.Call, d api.ClaimCreate) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodCreateClaim, call, d)
}

func (c *Node) PostClaim(ctx context.Context, call service.Call, d api.ClaimPost) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodPostClaim, call, d)
}

func (c *Node) CancelClaim(ctx context.Context, call service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodCancelClaim, call, d)
}

func (c *Node) RevokeClaim(ctx context.Context, call service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodRevokeClaim, call, d)
}

func (c *Node) SupersedeClaim(ctx context.Context, call service.Call, d api.ClaimSupersede) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodSupersedeClaim, call, d)
}

func (c *Node) AcquireReceipt(ctx context.Context, call service.Call, d api.ClaimReceipt) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodAcquireReceipt, call, d)
}

func (c *Node) AdoptReceipt(ctx context.Context, call service.Call, d api.ClaimAdopt) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodAdoptReceipt, call, d)
}

func (c *Node) RecordProgress(ctx context.Context, call service.Call, d api.ClaimProgress) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodRecordProgress, call, d)
}

func (c *Node) CloseTestament(ctx context.Context, call service.Call, d api.ClaimTestament) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodCloseTestament, call, d)
}

func (c *Node) PostTestament(ctx context.Context, call service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodPostTestament, call, d)
}

func (c *Node) ReceiveTestament(ctx context.Context, call service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodReceiveTestament, call, d)
}

func (c *Node) CommitDeadline(ctx context.Context, call service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodCommitDeadline, call, d)
}

func (c *Node) CommitDependency(ctx context.Context, call service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodCommitDependency, call, d)
}

func (c *Node) ReceiveArtifact(ctx context.Context, call service.Call, d api.ClaimArtifactRef) (service.ClaimWritten, error) {
	return claimWrite(ctx, c, service.MethodReceiveArtifact, call, d)
}

// BeginCheck begins an attempt once the target's bytes are verified here.
func (c *Node) BeginCheck(ctx context.Context, call service.Call, d api.ClaimBegin) (service.ClaimWritten, error) {
	if err := c.checkTarget(ctx, call, d.Command()); err != nil {
		return service.ClaimWritten{}, err
	}
	return claimWrite(ctx, c, service.MethodBeginCheck, call, d)
}

// ReportCheck reports a verdict once the target's bytes are verified here
// (unless an attempt on it runs); ev's bytes, if any, are staged and
// published in the verdict's own command.
func (c *Node) ReportCheck(ctx context.Context, call service.Call, d api.ClaimCheck, ev *service.Evidence) (service.ClaimWritten, error) {
	if ev != nil {
		if err := ledgerservice.EvidenceNamed(d); err != nil {
			return service.ClaimWritten{}, err
		}
	}
	if err := c.checkTarget(ctx, call, d.Report()); err != nil {
		return service.ClaimWritten{}, err
	}
	if ev == nil {
		return claimWrite(ctx, c, service.MethodReportCheck, call, d)
	}
	doc := verb.Evidence{Check: d, Name: ev.Name, Kind: ev.Kind, Schema: ev.Schema}
	return writeBytes[verb.Evidence, service.ClaimWritten](ctx, c, verb.MethodReportEvidence, call, doc, ev.Body)
}

// PublishArtifact stages body, then publishes the artifact d describes.
func (c *Node) PublishArtifact(ctx context.Context, call service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
	return writeBytes[api.ClaimPublish, service.ClaimWritten](ctx, c, service.MethodPublishArtifact, call, d, body)
}

// targetChecker is the replica's Service as checkTarget uses it
// (ledgerservice.Local).
type targetChecker interface {
	CheckTarget(ctx context.Context, c service.Call, cmd claim.Command) error
}

// checkTarget verifies the stored bytes of a check command's target in
// this replica's content store, once read-consistent and once custody of
// them is whole (custodyPending): the same refusal a local ledger gives
// for a damaged or missing copy, before anything is proposed.
func (c *Node) checkTarget(ctx context.Context, call service.Call, cmd claim.Command) error {
	if _, ok := ledgerservice.TargetOf(cmd); !ok {
		return nil
	}
	_, err := read(ctx, c, call, func(s service.Service, call service.Call) (struct{}, error) {
		tc, ok := s.(targetChecker)
		if !ok {
			return struct{}{}, errors.New("cluster: the replica's Service cannot verify a check's target")
		}
		// Custody first: a copy still on its way here is pending
		// (retryable), not missing.
		if err := c.custodyPending(ctx, call, cmd); err != nil {
			return struct{}{}, err
		}
		return struct{}{}, tc.CheckTarget(ctx, call, cmd)
	})
	return err
}

// Claim is one claim, read linearizably.
// Claim is one claim, read linearizably, with its artifacts' custody.
func (c *Node) Claim(ctx context.Context, call service.Call, id string) (service.ClaimShown, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ClaimShown, error) {
		shown, err := s.Claim(ctx, call, id)
		if err != nil {
			return shown, err
		}
		return c.withCustody(ctx, call, shown)
	})
}

// ListClaims is the claims f selects, read linearizably.
func (c *Node) ListClaims(ctx context.Context, call service.Call, f claim.Filter) (service.ClaimList, error) {
	return readOn(ctx, c, call, f, service.Service.ListClaims)
}

// ClaimGraph is every claim and relation, read linearizably.
func (c *Node) ClaimGraph(ctx context.Context, call service.Call) (service.ClaimGraph, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ClaimGraph, error) {
		return s.ClaimGraph(ctx, call)
	})
}

// Artifact opens an artifact's bytes from this replica's content store,
// read-consistent.
func (c *Node) Artifact(ctx context.Context, call service.Call, claimID, id string) (service.ArtifactContent, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ArtifactContent, error) {
		ac, err := s.Artifact(ctx, call, claimID, id)
		if badCopy(err) {
			if ls, lerr := s.ListArtifacts(ctx, call, service.ArtifactQuery{Claim: claimID, Artifact: id}); lerr == nil && len(ls.Artifacts) == 1 {
				if c.fetchForRead(ctx, call, ls.Artifacts[0].Content) {
					return s.Artifact(ctx, call, claimID, id)
				}
			}
		}
		return ac, err
	})
}

// badCopy reports whether a read was refused for this node's copy: damaged
// or missing. A bad copy is never served: the read fetches a verified copy
// from a holder (fetchForRead) and is answered from it, or stays refused.
func badCopy(err error) bool {
	r, ok := refuse.As(err)
	return ok && (r.Code == service.CodeDamaged || r.Code == refuse.NotFound)
}

// Content opens bytes by content digest from this replica's content
// store, read-consistent.
func (c *Node) Content(ctx context.Context, call service.Call, content digest.ContentDigest) (service.ArtifactContent, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ArtifactContent, error) {
		ac, err := s.Content(ctx, call, content)
		if badCopy(err) && c.fetchForRead(ctx, call, content.String()) {
			return s.Content(ctx, call, content)
		}
		return ac, err
	})
}

// ListArtifacts lists the artifacts and this replica's custody of their
// bytes, read-consistent.
func (c *Node) ListArtifacts(ctx context.Context, call service.Call, q service.ArtifactQuery) (service.ArtifactList, error) {
	return readOn(ctx, c, call, q, service.Service.ListArtifacts)
}

// VerifyArtifact re-hashes this replica's copy of an artifact,
// read-consistent.
func (c *Node) VerifyArtifact(ctx context.Context, call service.Call, claimID, id string) (service.ArtifactList, error) {
	return read(ctx, c, call, func(s service.Service, call service.Call) (service.ArtifactList, error) {
		return s.VerifyArtifact(ctx, call, claimID, id)
	})
}
