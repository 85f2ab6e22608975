package cluster

import (
	"context"
	"io"
	"net/http"

	"tally/api"
	"tally/claim"
	"tally/digest"
	"tally/service"
)

// The claims family is not replicated yet: a cluster node's server refuses
// its routes (NotInCluster) before they reach the node, and a caller of the
// node's Service gets the same refusal. The bytes of artifacts need a
// replicated content store first.

var _ service.Claims = (*Node)(nil)

// claimsNotReplicated is the refusal of every claim method.
func claimsNotReplicated() error {
	return service.NewRefusal(http.StatusNotImplemented, "NotInCluster", "the claims family is not served by a cluster node yet")
}

func (*Node) CreateClaim(context.Context, service.Call, api.ClaimCreate) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) PostClaim(context.Context, service.Call, api.ClaimPost) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) CancelClaim(context.Context, service.Call, api.ClaimEnd) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) RevokeClaim(context.Context, service.Call, api.ClaimEnd) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) SupersedeClaim(context.Context, service.Call, api.ClaimSupersede) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) AcquireReceipt(context.Context, service.Call, api.ClaimReceipt) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) AdoptReceipt(context.Context, service.Call, api.ClaimAdopt) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) RecordProgress(context.Context, service.Call, api.ClaimProgress) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) CloseTestament(context.Context, service.Call, api.ClaimTestament) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) PostTestament(context.Context, service.Call, api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) ReceiveTestament(context.Context, service.Call, api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) CommitDeadline(context.Context, service.Call, api.ClaimRef) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) CommitDependency(context.Context, service.Call, api.ClaimRef) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) BeginCheck(context.Context, service.Call, api.ClaimBegin) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) ReportCheck(context.Context, service.Call, api.ClaimCheck, *service.Evidence) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) PublishArtifact(context.Context, service.Call, api.ClaimPublish, io.Reader) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) ReceiveArtifact(context.Context, service.Call, api.ClaimArtifactRef) (service.ClaimWritten, error) {
	return service.ClaimWritten{}, claimsNotReplicated()
}

func (*Node) Claim(context.Context, service.Call, string) (service.ClaimShown, error) {
	return service.ClaimShown{}, claimsNotReplicated()
}

func (*Node) ListClaims(context.Context, service.Call, claim.Filter) (service.ClaimList, error) {
	return service.ClaimList{}, claimsNotReplicated()
}

func (*Node) ClaimGraph(context.Context, service.Call) (service.ClaimGraph, error) {
	return service.ClaimGraph{}, claimsNotReplicated()
}

func (*Node) Artifact(context.Context, service.Call, string, string) (service.ArtifactContent, error) {
	return service.ArtifactContent{}, claimsNotReplicated()
}

func (*Node) Content(context.Context, service.Call, digest.ContentDigest) (service.ArtifactContent, error) {
	return service.ArtifactContent{}, claimsNotReplicated()
}

func (*Node) ListArtifacts(context.Context, service.Call, service.ArtifactQuery) (service.ArtifactList, error) {
	return service.ArtifactList{}, claimsNotReplicated()
}

func (*Node) VerifyArtifact(context.Context, service.Call, string, string) (service.ArtifactList, error) {
	return service.ArtifactList{}, claimsNotReplicated()
}
