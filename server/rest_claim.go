package server

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"tally/api"
	"tally/artifact"
	"tally/service"
	"tally/store"
	"tally/vocab"
)

// The claims family over HTTP. Request bodies are the documents the CLI
// reads on stdin (`tally claim create -` and friends), decoded by the same
// strict decoder, without request_id (the Idempotency-Key header carries it)
// and with the claim id taken from the path (a "claim" member, if given, must
// name the same claim). Responses are the documents the CLI prints with
// --json: {"records":[…],"claim":VIEW} for writes.

// claimRoutes are the claims family's routes, appended to the route table.
func (s *Server) claimRoutes() []route {
	c := sessionPath + "/claims"
	one := c + "/{id}"
	return []route{
		{name: "claim.create", method: "POST", pattern: c, summary: "Issue a claim as the authenticated claimant", body: "ClaimCreate", write: true, serve: claimWrite(s, http.StatusCreated, service.Service.CreateClaim)},
		{name: "claim.list", method: "GET", pattern: c, summary: "List claims (state=S repeatable, open, overdue, claimant, respondent, participant, now)", serve: s.claimList},
		{name: "claim.show", method: "GET", pattern: one, summary: "One claim: slots, checks, testaments, artifacts, relations (now)", serve: s.claimShow},
		{name: "claim.post", method: "POST", pattern: one + "/post", summary: "Post a generated claim, or record that posting failed (claimant)", body: "ClaimPost", write: true, serve: claimWrite(s, http.StatusOK, service.Service.PostClaim, "claim")},
		{name: "claim.cancel", method: "POST", pattern: one + "/cancel", summary: "End a claim: Cancelled (claimant)", body: "ClaimEnd", write: true, serve: claimWrite(s, http.StatusOK, service.Service.CancelClaim, "claim")},
		{name: "claim.revoke", method: "POST", pattern: one + "/revoke", summary: "Withdraw the work from its holder: Revoked (claimant)", body: "ClaimEnd", write: true, serve: claimWrite(s, http.StatusOK, service.Service.RevokeClaim, "claim")},
		{name: "claim.supersede", method: "POST", pattern: one + "/supersede", summary: "End a claim in favour of its successor (claimant)", body: "ClaimSupersede", write: true, serve: claimWrite(s, http.StatusOK, service.Service.SupersedeClaim, "claim")},
		{name: "claim.receipt", method: "POST", pattern: one + "/receipt", summary: "Acquire the execution receipt, or decline it (respondent)", body: "ClaimReceipt", write: true, serve: claimWrite(s, http.StatusOK, service.Service.AcquireReceipt, "claim")},
		{name: "claim.adopt", method: "POST", pattern: one + "/adopt", summary: "Move the receipt to a new holder at the next generation (claimant)", body: "ClaimAdopt", write: true, serve: claimWrite(s, http.StatusOK, service.Service.AdoptReceipt, "claim")},
		{name: "claim.progress", method: "POST", pattern: one + "/progress", summary: "Record progress under the receipt (holder)", body: "ClaimProgress", write: true, serve: claimWrite(s, http.StatusOK, service.Service.RecordProgress, "claim")},
		{name: "claim.testament.close", method: "POST", pattern: one + "/testaments", summary: "Close the work cycle (holder), the claimant's result testament, or a failed one", body: "ClaimTestament", write: true, serve: claimWrite(s, http.StatusOK, service.Service.CloseTestament, "claim")},
		{name: "claim.testament.post", method: "POST", pattern: one + "/testaments/{testament}/post", summary: "Post a closed testament (its author)", body: "Empty", write: true, serve: claimWrite(s, http.StatusOK, service.Service.PostTestament, "claim", "testament")},
		{name: "claim.testament.receive", method: "POST", pattern: one + "/testaments/{testament}/receive", summary: "Receive a posted response testament (claimant)", body: "Empty", write: true, serve: claimWrite(s, http.StatusOK, service.Service.ReceiveTestament, "claim", "testament")},
		{name: "claim.deadline", method: "POST", pattern: one + "/deadline", summary: "Commit the claim's passed deadline: Expired, or Deadlocked for a wait-cycle's victim (timekeeper)", body: "Empty", write: true, serve: claimWrite(s, http.StatusOK, service.Service.CommitDeadline, "claim")},
		{name: "claim.dependency", method: "POST", pattern: one + "/dependency", summary: "Commit the DependencyFailed fact of a claim whose dependency ended unsatisfied (any participant; the fact is checked)", body: "Empty", write: true, serve: claimWrite(s, http.StatusOK, service.Service.CommitDependency, "claim")},
		{name: "claim.check.begin", method: "POST", pattern: one + "/checks/{check}/begin", summary: "Begin the next attempt of a check on one target (designated evaluator)", body: "ClaimCheck", write: true, serve: claimWrite(s, http.StatusOK, service.Service.BeginCheck, "claim", "check")},
		{name: "claim.check.report", method: "POST", pattern: one + "/checks/{check}/report", summary: "Report a verdict with evidence (designated evaluator)", body: "ClaimCheck", write: true, serve: claimWrite(s, http.StatusOK, reportCheck, "claim", "check")},
		{name: "claim.check.report_evidence", method: "PUT", pattern: one + "/checks/{check}/report", summary: "Store the body's bytes as the evaluator's evidence and report the verdict citing it, in one write (artifact, digest, result, note, evidence, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, serve: s.claimReportWithEvidence},
		{name: "claim.artifact.put", method: "PUT", pattern: one + "/artifacts/{artifact}", summary: "Store the body's bytes and publish the artifact (role, slot, generation, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, serve: s.claimArtifactPut},
		{name: "claim.artifact.get", method: "GET", pattern: one + "/artifacts/{artifact}", summary: "The artifact's bytes, verified against its recorded content digest", stream: s.claimArtifactGet},
		{name: "claim.artifact.verify", method: "GET", pattern: one + "/artifacts/{artifact}/verify", summary: "Re-hash the artifact's stored copy: its row when intact, else the refusal reading it would give", serve: s.artifactVerifyOne},
		{name: "artifact.list", method: "GET", pattern: sessionPath + "/artifacts", summary: "Recorded artifacts and whether their bytes are stored (claim, artifact); verify=true re-hashes each copy (ok, missing, damaged)", serve: s.artifactList},
		{name: "artifact.content", method: "GET", pattern: sessionPath + "/objects/{content}", summary: "Bytes by content digest, served only when an artifact of this session records that content", stream: s.contentGet},
		{name: "claim.graph", method: "GET", pattern: sessionPath + "/claim-graph", summary: "Every claim's state and every relation between claims (now)", serve: s.claimGraph},
		{name: "claim.artifact.receive", method: "POST", pattern: one + "/artifacts/{artifact}/receive", summary: "Record that the claimant observed an artifact (claimant)", body: "ClaimArtifactReceive", write: true, serve: claimWrite(s, http.StatusOK, service.Service.ReceiveArtifact, "claim", "artifact")},
	}
}

// claimWrite is a claim write route whose body is an api claim document
// D (apiWrite), its members named in path set from the path ("claim" from
// {id}, and e.g. "check" from {check}), run by the Service's method run.
// Every rule is the claim core's; a check's target is verified in the
// content store first.
func claimWrite[D any](s *Server, status int, run func(svc service.Service, ctx context.Context, c service.Call, d D) (service.ClaimWritten, error), path ...string) endpoint {
	return apiWrite(s, status, docRule[D]{members: path}, func(r *http.Request, c service.Call, d *D) (service.Doc, error) {
		res, err := run(s.local, r.Context(), c, *d)
		return res.Doc, err
	})
}

func (s *Server) objects() (*artifact.Store, error) {
	return artifact.OpenStore(store.ObjectsDir(s.cfg.Root))
}

// bytesWrite is the preamble of a route whose body is bytes and whose
// description is in the query: the caller (the route's media type, octet-
// stream, is checked before) and only the named parameters.
func (s *Server) bytesWrite(r *http.Request, what string, params ...string) (service.Call, url.Values, error) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(params, k) {
			return service.Call{}, nil, vocab.Invalidf(k, "is not a parameter of "+what+" ("+strings.Join(params, ", ")+")")
		}
	}
	c, err := s.writeCall(r, "")
	return c, q, err
}

// claimReportWithEvidence stores the body as the evaluator's result
// artifact and reports the verdict citing it as one ledger write: a verdict
// the ledger refuses leaves no evidence recorded (the bytes stay in the
// content store, unreferenced).
func (s *Server) claimReportWithEvidence(r *http.Request) (int, any, error) {
	c, q, err := s.bytesWrite(r, "a verdict with evidence", "artifact", "digest", "result", "note", "evidence", "kind", "schema", "name")
	if err != nil {
		return 0, nil, err
	}
	d := api.ClaimCheck{Claim: r.PathValue("id"), Check: r.PathValue("check"), Artifact: q.Get("artifact"), Digest: q.Get("digest"),
		Result: q.Get("result"), Note: q.Get("note"), Evidence: q.Get("evidence")}
	res, err := s.local.ReportCheck(r.Context(), c, d, &service.Evidence{Name: q.Get("name"), Kind: q.Get("kind"), Schema: q.Get("schema"), Body: r.Body})
	return http.StatusOK, res.Doc, err
}

// claimArtifactPut streams the body into the content store, then publishes
// the artifact with the description in the query.
func (s *Server) claimArtifactPut(r *http.Request) (int, any, error) {
	c, q, err := s.bytesWrite(r, "an artifact", "role", "slot", "kind", "schema", "name", "generation")
	if err != nil {
		return 0, nil, err
	}
	var gen uint64
	if v := q.Get("generation"); v != "" {
		if gen, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, nil, vocab.Invalidf("generation", "must be a whole number")
		}
	}
	d := api.ClaimPublish{Claim: r.PathValue("id"), Artifact: r.PathValue("artifact"), Role: q.Get("role"), Slot: q.Get("slot"),
		Kind: q.Get("kind"), Schema: q.Get("schema"), Name: q.Get("name"), Generation: gen}
	res, err := s.local.PublishArtifact(r.Context(), c, d, r.Body)
	return http.StatusCreated, res.Doc, err
}

func (s *Server) claimList(r *http.Request) (int, any, error) {
	c, err := s.readCall(r)
	if err != nil {
		return 0, nil, err
	}
	var q api.ClaimQuery
	if err := api.DecodeQuery(r.URL.Query(), &q); err != nil {
		return 0, nil, err
	}
	res, err := s.local.ListClaims(r.Context(), c, q.Filter())
	return http.StatusOK, res.JSON, err
}

func (s *Server) claimShow(r *http.Request) (int, any, error) {
	c, err := s.readCall(r)
	if err != nil {
		return 0, nil, err
	}
	res, err := s.local.Claim(r.Context(), c, r.PathValue("id"))
	return http.StatusOK, res.JSON, err
}

// reportCheck is check.report's route: a verdict citing evidence already
// published (evidence with its bytes is the PUT route).
func reportCheck(svc service.Service, ctx context.Context, c service.Call, d api.ClaimCheck) (service.ClaimWritten, error) {
	return svc.ReportCheck(ctx, c, d, nil)
}
