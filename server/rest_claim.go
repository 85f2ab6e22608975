package server

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"tally/api"
	"tally/refuse"
	"tally/service"
)

// The claims family over HTTP. Request bodies are the documents the CLI
// reads on stdin (`tally claim create -` and friends), decoded by the same
// strict decoder, without request_id (the Idempotency-Key header carries it)
// and with the claim id taken from the path (a "claim" member, if given, must
// name the same claim). Responses are the documents the CLI prints with
// --json: {"records":[…],"claim":VIEW} for writes.

// bytesWrite is the preamble of a route whose body is bytes and whose
// description is in the query: the caller (the route's media type, octet-
// stream, is checked before) and only the named parameters.
func (s *Server) bytesWrite(r *http.Request, what string, params ...string) (service.Call, url.Values, error) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(params, k) {
			return service.Call{}, nil, refuse.Invalidf(k, "is not a parameter of "+what+" ("+strings.Join(params, ", ")+")")
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
			return 0, nil, refuse.Invalidf("generation", "must be a whole number")
		}
	}
	d := api.ClaimPublish{Claim: r.PathValue("id"), Artifact: r.PathValue("artifact"), Role: q.Get("role"), Slot: q.Get("slot"),
		Kind: q.Get("kind"), Schema: q.Get("schema"), Name: q.Get("name"), Generation: gen}
	res, err := s.local.PublishArtifact(r.Context(), c, d, r.Body)
	return http.StatusCreated, res.Doc, err
}
