package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/instant"
	"tally/jsondoc"
	"tally/ledger"
	"tally/rule"
	"tally/store"
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
		{name: "claim.create", method: "POST", pattern: c, summary: "Issue a claim as the authenticated claimant", body: "ClaimCreate", write: true, handle: s.claimAction(http.StatusCreated, "create")},
		{name: "claim.list", method: "GET", pattern: c, summary: "List claims (state=S repeatable, open, overdue, claimant, respondent, participant, now)", handle: s.claimList},
		{name: "claim.show", method: "GET", pattern: one, summary: "One claim: slots, checks, testaments, artifacts, relations (now)", handle: s.claimShow},
		{name: "claim.post", method: "POST", pattern: one + "/post", summary: "Post a generated claim, or record that posting failed (claimant)", body: "ClaimPost", write: true, handle: s.claimAction(http.StatusOK, "post", "claim")},
		{name: "claim.cancel", method: "POST", pattern: one + "/cancel", summary: "End a claim: Cancelled (claimant)", body: "ClaimEnd", write: true, handle: s.claimAction(http.StatusOK, "cancel", "claim")},
		{name: "claim.revoke", method: "POST", pattern: one + "/revoke", summary: "Withdraw the work from its holder: Revoked (claimant)", body: "ClaimEnd", write: true, handle: s.claimAction(http.StatusOK, "revoke", "claim")},
		{name: "claim.supersede", method: "POST", pattern: one + "/supersede", summary: "End a claim in favour of its successor (claimant)", body: "ClaimSupersede", write: true, handle: s.claimAction(http.StatusOK, "supersede", "claim")},
		{name: "claim.receipt", method: "POST", pattern: one + "/receipt", summary: "Acquire the execution receipt, or decline it (respondent)", body: "ClaimReceipt", write: true, handle: s.claimAction(http.StatusOK, "receipt.acquire", "claim")},
		{name: "claim.adopt", method: "POST", pattern: one + "/adopt", summary: "Move the receipt to a new holder at the next generation (claimant)", body: "ClaimAdopt", write: true, handle: s.claimAction(http.StatusOK, "receipt.adopt", "claim")},
		{name: "claim.progress", method: "POST", pattern: one + "/progress", summary: "Record progress under the receipt (holder)", body: "ClaimProgress", write: true, handle: s.claimAction(http.StatusOK, "progress", "claim")},
		{name: "claim.testament.close", method: "POST", pattern: one + "/testaments", summary: "Close the work cycle (holder), the claimant's result testament, or a failed one", body: "ClaimTestament", write: true, handle: s.claimAction(http.StatusOK, "testament.close", "claim")},
		{name: "claim.testament.post", method: "POST", pattern: one + "/testaments/{testament}/post", summary: "Post a closed testament (its author)", body: "Empty", write: true, handle: s.claimAction(http.StatusOK, "testament.post", "claim", "testament")},
		{name: "claim.testament.receive", method: "POST", pattern: one + "/testaments/{testament}/receive", summary: "Receive a posted response testament (claimant)", body: "Empty", write: true, handle: s.claimAction(http.StatusOK, "testament.receive", "claim", "testament")},
		{name: "claim.deadline", method: "POST", pattern: one + "/deadline", summary: "Commit the claim's passed deadline: Expired, or Deadlocked for a wait-cycle's victim (timekeeper)", body: "Empty", write: true, handle: s.claimAction(http.StatusOK, "deadline.commit", "claim")},
		{name: "claim.dependency", method: "POST", pattern: one + "/dependency", summary: "Commit the DependencyFailed fact of a claim whose dependency ended unsatisfied (any participant; the fact is checked)", body: "Empty", write: true, handle: s.claimAction(http.StatusOK, "dependency.commit", "claim")},
		{name: "claim.check.begin", method: "POST", pattern: one + "/checks/{check}/begin", summary: "Begin the next attempt of a check on one target (designated evaluator)", body: "ClaimCheck", write: true, handle: s.claimAction(http.StatusOK, "check.begin", "claim", "check")},
		{name: "claim.check.report", method: "POST", pattern: one + "/checks/{check}/report", summary: "Report a verdict with evidence (designated evaluator)", body: "ClaimCheck", write: true, handle: s.claimAction(http.StatusOK, "check.report", "claim", "check")},
		{name: "claim.check.report_evidence", method: "PUT", pattern: one + "/checks/{check}/report", summary: "Store the body's bytes as the evaluator's evidence and report the verdict citing it, in one write (artifact, digest, result, note, evidence, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, handle: s.claimReportWithEvidence},
		{name: "claim.artifact.put", method: "PUT", pattern: one + "/artifacts/{artifact}", summary: "Store the body's bytes and publish the artifact (role, slot, generation, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, handle: s.claimArtifactPut},
		{name: "claim.artifact.get", method: "GET", pattern: one + "/artifacts/{artifact}", summary: "The artifact's bytes, verified against its recorded content digest", handle: s.claimArtifactGet},
		{name: "claim.artifact.verify", method: "GET", pattern: one + "/artifacts/{artifact}/verify", summary: "Re-hash the artifact's stored copy: its row when intact, else the refusal reading it would give", handle: s.artifactVerifyOne},
		{name: "artifact.list", method: "GET", pattern: sessionPath + "/artifacts", summary: "Recorded artifacts and whether their bytes are stored (claim, artifact); verify=true re-hashes each copy (ok, missing, damaged)", handle: s.artifactList},
		{name: "artifact.content", method: "GET", pattern: sessionPath + "/objects/{content}", summary: "Bytes by content digest, served only when an artifact of this session records that content", handle: s.contentGet},
		{name: "claim.graph", method: "GET", pattern: sessionPath + "/claim-graph", summary: "Every claim's state and every relation between claims (now)", handle: s.claimGraph},
		{name: "claim.artifact.receive", method: "POST", pattern: one + "/artifacts/{artifact}/receive", summary: "Record that the claimant observed an artifact (claimant)", body: "ClaimArtifactReceive", write: true, handle: s.claimAction(http.StatusOK, "artifact.receive", "claim", "artifact")},
	}
}

// renderClaim makes a claim write's response: the records appended and the
// claim as it stands, the document `tally claim … --json` prints, with the
// notes cmd's write makes (nil: none).
func (s *Server) renderClaim(id string, cmd claim.Command) func(st *ledger.State, res []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		v, _ := st.Claims.Claim(id, s.cfg.Ledger.Now().UTC())
		return ClaimWriteDoc(res, &v, ClaimNotes(cmd, &v)...)
	}
}

// ClaimNotes are what the write of cmd says beside its records, the claim
// then being v: that a successor inherited its predecessor's terms.
func ClaimNotes(cmd claim.Command, v *claim.View) []string {
	if c, ok := cmd.(claim.Create); ok {
		if n := claim.InheritNote(c, v); n != "" {
			return []string{n}
		}
	}
	return nil
}

// ClaimWriteDoc is the document a claim write answers with, on the CLI and
// over HTTP: {"records":[lines…],"claim":VIEW}, and "notes":[…] when the
// write has something to say beside them.
func ClaimWriteDoc(res []ledger.Result, v *claim.View, notes ...string) []byte {
	recs := []byte{'['}
	for i, r := range res {
		if i > 0 {
			recs = append(recs, ',')
		}
		recs = append(recs, r.Line...)
	}
	recs = append(recs, ']')
	vb, err := json.Marshal(v)
	if err != nil {
		vb = []byte("null")
	}
	if len(notes) > 0 {
		nb, _ := json.Marshal(notes)
		return jsondoc.Doc(jsondoc.M("records", recs), jsondoc.M("claim", vb), jsondoc.M("notes", nb))
	}
	return jsondoc.Doc(jsondoc.M("records", recs), jsondoc.M("claim", vb))
}

// claimWriteGuarded is the common shape of a claim write route:
// authenticate, read the body, build the command, run guard on it (for the
// I/O the claim core cannot do itself), execute it.
func (s *Server) claimWriteGuarded(w http.ResponseWriter, r *http.Request, status int, build func(body []byte, id string, p principal) (claim.Command, error), guard func(l *ledger.Ledger, cmd claim.Command) error) {
	p, l, err := s.openSession(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	body, err := readBody(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	cmd, err := build(body, id, p)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if c, ok := cmd.(claim.Create); ok {
		id = c.Claim
	}
	if guard != nil {
		if err := guard(l, cmd); err != nil {
			s.writeError(w, err)
			return
		}
	}
	s.execute(w, r, p, l, body, ledger.Command{Claim: cmd}, status, s.renderClaim(id, cmd))
}

// claimAction is a claim write route that runs the claim action name, the
// same one an A2A message runs (a2aClaimActions): its document is the body,
// with the members named in path ("claim" from {id}, and e.g. "check" from
// {check}) taken from the path, so a body member that names another is
// refused. Every rule is the claim core's; a check's target is verified in
// the content store first.
func (s *Server) claimAction(status int, name string, path ...string) http.HandlerFunc {
	act, ok := a2aClaimActions.Find(name)
	if !ok {
		panic("server: no claim action " + name)
	}
	return func(w http.ResponseWriter, r *http.Request) {
		s.claimWriteGuarded(w, r, status, func(body []byte, _ string, _ principal) (claim.Command, error) {
			if len(path) > 0 {
				var err error
				if body, err = withPathMembers(r, body, path); err != nil {
					return nil, err
				}
			}
			return act.Build("body", body, s.cfg.Ledger.Now())
		}, s.guardTarget(r.Context()))
	}
}

// withPathMembers sets the body's members named in path to the path's
// values ("claim" is the path's {id}), refusing a member that names another.
func withPathMembers(r *http.Request, body []byte, path []string) ([]byte, error) {
	doc := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := json.Unmarshal(body, &doc); err != nil {
			return nil, rule.Invalidf("body", "must be one JSON object")
		}
	}
	for _, m := range path {
		v := r.PathValue(m)
		if m == "claim" {
			v = r.PathValue("id")
		}
		if raw, ok := doc[m]; ok {
			var given string
			if json.Unmarshal(raw, &given) != nil || (given != "" && given != v) {
				return nil, rule.Invalidf(m, "names "+string(raw)+" but the path names "+strconv.Quote(v))
			}
		}
		doc[m], _ = json.Marshal(v)
	}
	return json.Marshal(doc)
}

func needField(field, v string) error {
	if v == "" {
		return rule.Invalidf(field, "required")
	}
	return nil
}

// guardTarget verifies the bytes of a check's target before a record that
// begins an attempt on it is appended, as the CLI does on a local ledger.
func (s *Server) guardTarget(ctx context.Context) func(l *ledger.Ledger, cmd claim.Command) error {
	return func(l *ledger.Ledger, cmd claim.Command) error {
		objs, err := s.objects()
		if err != nil {
			return err
		}
		now := s.cfg.Ledger.Now().UTC()
		switch c := cmd.(type) {
		case claim.BeginCheck:
			return VerifyTarget(ctx, l, objs, c.Claim, c.Check, c.Artifact, false, now)
		case claim.ReportVerdict:
			return VerifyTarget(ctx, l, objs, c.Claim, c.Check, c.Artifact, true, now)
		}
		return nil
	}
}

func (s *Server) objects() (*artifact.Store, error) {
	return artifact.OpenStore(store.ObjectsDir(s.cfg.Root))
}

// putBytes streams a request's bytes into the content store: an artifact's
// over HTTP or A2A, or a verdict's evidence.
func (s *Server) putBytes(ctx context.Context, body io.Reader) (digest.ContentDigest, int64, error) {
	objs, err := s.objects()
	if err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("open the content store: %w", err)
	}
	content, size, err := objs.Put(ctx, body)
	if err != nil {
		return digest.ContentDigest{}, 0, fmt.Errorf("store the bytes: %w", err)
	}
	return content, size, nil
}

// bytesWrite is the preamble of a route whose body is bytes and whose
// description is in the query: the session (the route's media type, octet-
// stream, is checked before) and only the named parameters. It has answered the request when ok is false.
func (s *Server) bytesWrite(w http.ResponseWriter, r *http.Request, what string, params ...string) (p principal, l *ledger.Ledger, q url.Values, ok bool) {
	p, l, err := s.openSession(r)
	if err != nil {
		s.writeError(w, err)
		return p, nil, nil, false
	}
	q = r.URL.Query()
	for k := range q {
		if !slices.Contains(params, k) {
			s.writeError(w, rule.Invalidf(k, "is not a parameter of "+what+" ("+strings.Join(params, ", ")+")"))
			return p, nil, nil, false
		}
	}
	return p, l, q, true
}

// claimReportWithEvidence stores the body as the evaluator's result
// artifact and reports the verdict citing it as one ledger write: a verdict
// the ledger refuses leaves no evidence recorded (the bytes stay in the
// content store, unreferenced).
func (s *Server) claimReportWithEvidence(w http.ResponseWriter, r *http.Request) {
	p, l, q, ok := s.bytesWrite(w, r, "a verdict with evidence", "artifact", "digest", "result", "note", "evidence", "kind", "schema", "name")
	if !ok {
		return
	}
	for _, f := range []string{"artifact", "evidence"} {
		if err := needField(f, q.Get(f)); err != nil {
			s.writeError(w, err)
			return
		}
	}
	kind, name := q.Get("kind"), q.Get("name")
	if kind == "" {
		kind = "evidence"
	}
	if name == "" {
		name = q.Get("evidence")
	}
	id, check := r.PathValue("id"), r.PathValue("check")
	cmd := claim.ReportVerdict{Claim: id, Check: check, Artifact: q.Get("artifact"), Digest: q.Get("digest"),
		Result: claim.Result(q.Get("result")), Note: q.Get("note")}
	// The target's bytes are verified before the evidence is stored.
	if err := s.guardTarget(r.Context())(l, cmd); err != nil {
		s.writeError(w, err)
		return
	}
	content, size, err := s.putBytes(r.Context(), r.Body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cmd.Publish = &claim.PublishArtifact{Claim: id, Artifact: q.Get("evidence"), Role: claim.RoleResult, Kind: kind,
		Schema: q.Get("schema"), Name: name, Content: content, Size: size}
	digestBody := []byte(r.URL.RawQuery + "\n" + content.String())
	s.execute(w, r, p, l, digestBody, ledger.Command{Claim: cmd}, http.StatusOK, s.renderClaim(id, nil))
}

// claimArtifactPut streams the body into the content store, then publishes
// the artifact with the description in the query. The idempotency digest
// covers the query and the bytes.
func (s *Server) claimArtifactPut(w http.ResponseWriter, r *http.Request) {
	p, l, q, ok := s.bytesWrite(w, r, "an artifact", "role", "slot", "kind", "schema", "name", "generation")
	if !ok {
		return
	}
	var err error
	var gen uint64
	if v := q.Get("generation"); v != "" {
		if gen, err = strconv.ParseUint(v, 10, 64); err != nil {
			s.writeError(w, rule.Invalidf("generation", "must be a whole number"))
			return
		}
	}
	// The role and kind default in the claim core; the name is the id.
	id, a := r.PathValue("id"), r.PathValue("artifact")
	name := cmp.Or(q.Get("name"), a)
	content, size, err := s.putBytes(r.Context(), r.Body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cmd := claim.PublishArtifact{Claim: id, Artifact: a, Role: claim.Role(q.Get("role")), Slot: q.Get("slot"), Kind: q.Get("kind"),
		Schema: q.Get("schema"), Name: name, Generation: gen, Content: content, Size: size}
	// The digest binds the request id to the description and the content.
	digestBody := []byte(r.URL.RawQuery + "\n" + content.String())
	s.execute(w, r, p, l, digestBody, ledger.Command{Claim: cmd}, http.StatusCreated, s.renderClaim(id, nil))
}

// openReadAt is openRead and the time the read is asked at (now=).
func (s *Server) openReadAt(r *http.Request) (*ledger.Ledger, time.Time, error) {
	l, err := s.openRead(r)
	if err != nil {
		return nil, time.Time{}, err
	}
	now, err := s.readNow(r)
	return l, now, err
}

func (s *Server) claimList(w http.ResponseWriter, r *http.Request) {
	l, now, err := s.openReadAt(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	q := r.URL.Query()
	f := claim.Filter{Claimant: q.Get("claimant"), Respondent: q.Get("respondent"), Participant: q.Get("participant")}
	for _, b := range [][2]any{{"open", &f.Open}, {"overdue", &f.Overdue}} {
		if v := q.Get(b[0].(string)); v != "" {
			x, err := strconv.ParseBool(v)
			if err != nil {
				s.writeError(w, rule.Invalidf(b[0].(string), "must be true or false"))
				return
			}
			*b[1].(*bool) = x
		}
	}
	for _, st := range q["state"] {
		f.States = append(f.States, claim.Status(st))
	}
	var list []claim.Summary
	list = l.Claims(f, now)
	b, err := json.Marshal(list)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("now", jsondoc.S(instant.Format(now))), jsondoc.M("claims", b)))
}

func (s *Server) claimShow(w http.ResponseWriter, r *http.Request) {
	l, now, err := s.openReadAt(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	id := r.PathValue("id")
	var v claim.View
	var ok bool
	v, ok = l.Claim(id, now)
	if !ok {
		s.writeError(w, rule.NotFoundf("claim", "no claim "+strconv.Quote(id)))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("now", jsondoc.S(instant.Format(now))), jsondoc.M("claim", b)))
}
