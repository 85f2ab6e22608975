package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"tally/artifact"
	"tally/claim"
	"tally/jsondoc"
	"tally/ledger"
	"tally/promise"
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
		{name: "claim.create", method: "POST", pattern: c, summary: "Issue a claim as the authenticated claimant", body: "ClaimCreate", write: true, handle: s.claimCreate},
		{name: "claim.list", method: "GET", pattern: c, summary: "List claims (state=S repeatable, open, overdue, claimant, respondent, participant, now)", handle: s.claimList},
		{name: "claim.show", method: "GET", pattern: one, summary: "One claim: slots, checks, testaments, artifacts, relations (now)", handle: s.claimShow},
		{name: "claim.post", method: "POST", pattern: one + "/post", summary: "Post a generated claim, or record that posting failed (claimant)", body: "ClaimPost", write: true, handle: s.claimPost},
		{name: "claim.cancel", method: "POST", pattern: one + "/cancel", summary: "End a claim: Cancelled (claimant)", body: "ClaimEnd", write: true, handle: s.claimEnd("cancel")},
		{name: "claim.revoke", method: "POST", pattern: one + "/revoke", summary: "Withdraw the work from its holder: Revoked (claimant)", body: "ClaimEnd", write: true, handle: s.claimEnd("revoke")},
		{name: "claim.supersede", method: "POST", pattern: one + "/supersede", summary: "End a claim in favour of its successor (claimant)", body: "ClaimSupersede", write: true, handle: s.claimSupersede},
		{name: "claim.receipt", method: "POST", pattern: one + "/receipt", summary: "Acquire the execution receipt, or decline it (respondent)", body: "ClaimReceipt", write: true, handle: s.claimReceipt},
		{name: "claim.adopt", method: "POST", pattern: one + "/adopt", summary: "Move the receipt to a new holder at the next generation (claimant)", body: "ClaimAdopt", write: true, handle: s.claimAdopt},
		{name: "claim.progress", method: "POST", pattern: one + "/progress", summary: "Record progress under the receipt (holder)", body: "ClaimProgress", write: true, handle: s.claimProgress},
		{name: "claim.testament.close", method: "POST", pattern: one + "/testaments", summary: "Close the work cycle (holder), the claimant's result testament, or a failed one", body: "ClaimTestament", write: true, handle: s.claimTestamentClose},
		{name: "claim.testament.post", method: "POST", pattern: one + "/testaments/{testament}/post", summary: "Post a closed testament (its author)", body: "Empty", write: true, handle: s.claimTestamentStep("post")},
		{name: "claim.testament.receive", method: "POST", pattern: one + "/testaments/{testament}/receive", summary: "Receive a posted response testament (claimant)", body: "Empty", write: true, handle: s.claimTestamentStep("receive")},
		{name: "claim.deadline", method: "POST", pattern: one + "/deadline", summary: "Commit the claim's passed deadline: Expired, or Deadlocked for a wait-cycle's victim (timekeeper)", body: "Empty", write: true, handle: s.claimFact(true)},
		{name: "claim.dependency", method: "POST", pattern: one + "/dependency", summary: "Commit the DependencyFailed fact of a claim whose dependency ended unsatisfied (any participant; the fact is checked)", body: "Empty", write: true, handle: s.claimFact(false)},
		{name: "claim.check.begin", method: "POST", pattern: one + "/checks/{check}/begin", summary: "Begin the next attempt of a check on one target (designated evaluator)", body: "ClaimCheck", write: true, handle: s.claimCheck("begin")},
		{name: "claim.check.report", method: "POST", pattern: one + "/checks/{check}/report", summary: "Report a verdict with evidence (designated evaluator)", body: "ClaimCheck", write: true, handle: s.claimCheck("report")},
		{name: "claim.check.report_evidence", method: "PUT", pattern: one + "/checks/{check}/report", summary: "Store the body's bytes as the evaluator's evidence and report the verdict citing it, in one write (artifact, digest, result, note, evidence, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, handle: s.claimReportWithEvidence},
		{name: "claim.artifact.put", method: "PUT", pattern: one + "/artifacts/{artifact}", summary: "Store the body's bytes and publish the artifact (role, slot, generation, kind, schema, name in the query)", body: "Bytes", write: true, bodyMax: ArtifactBodyMax, handle: s.claimArtifactPut},
		{name: "claim.artifact.get", method: "GET", pattern: one + "/artifacts/{artifact}", summary: "The artifact's bytes, verified against its recorded content digest", handle: s.claimArtifactGet},
		{name: "claim.artifact.verify", method: "GET", pattern: one + "/artifacts/{artifact}/verify", summary: "Re-hash the artifact's stored copy: its row when intact, else the refusal reading it would give", handle: s.artifactVerifyOne},
		{name: "artifact.list", method: "GET", pattern: sessionPath + "/artifacts", summary: "Recorded artifacts and whether their bytes are stored (claim, artifact); verify=true re-hashes each copy (ok, missing, damaged)", handle: s.artifactList},
		{name: "artifact.content", method: "GET", pattern: sessionPath + "/objects/{content}", summary: "Bytes by content digest, served only when an artifact of this session records that content", handle: s.contentGet},
		{name: "claim.graph", method: "GET", pattern: sessionPath + "/claim-graph", summary: "Every claim's state and every relation between claims (now)", handle: s.claimGraph},
		{name: "claim.artifact.receive", method: "POST", pattern: one + "/artifacts/{artifact}/receive", summary: "Record that the claimant observed an artifact (claimant)", body: "ClaimArtifactReceive", write: true, handle: s.claimArtifactReceive},
	}
}

// claimDoc decodes a claim command's body. An empty body is an empty
// document. A "claim" member must name the path's claim.
func claimDoc(body []byte, id string, claimField *string, doc any) error {
	if len(body) == 0 {
		body = []byte("{}")
	}
	if err := jsondoc.Strict("body", body, doc); err != nil {
		return err
	}
	if claimField != nil {
		if *claimField != "" && *claimField != id {
			return rule.Invalidf("claim", "names "+strconv.Quote(*claimField)+" but the path names "+strconv.Quote(id))
		}
		*claimField = id
	}
	return nil
}

// renderClaim makes a claim write's response: the records appended and the
// claim as it stands, the document `tally claim … --json` prints.
func (s *Server) renderClaim(id string) func(st *ledger.State, res []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		v, _ := st.Claims.Claim(id, s.cfg.Ledger.Now().UTC())
		return ClaimWriteDoc(res, &v)
	}
}

// ClaimWriteDoc is the document a claim write answers with, on the CLI and
// over HTTP: {"records":[lines…],"claim":VIEW}.
func ClaimWriteDoc(res []ledger.Result, v *claim.View) []byte {
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
	return jsondoc.Doc(jsondoc.M("records", recs), jsondoc.M("claim", vb))
}

// claimWrite is the common shape of a claim write route: authenticate, read
// the body, build the command, execute it.
func (s *Server) claimWrite(w http.ResponseWriter, r *http.Request, status int, build func(body []byte, id string, p principal) (claim.Command, error)) {
	s.claimWriteGuarded(w, r, status, build, nil)
}

// claimWriteGuarded is claimWrite with a guard run on the built command
// before it executes, for the I/O the claim core cannot do itself.
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
	s.execute(w, r, p, l, body, ledger.Command{Claim: cmd}, status, s.renderClaim(id))
}

func needField(field, v string) error {
	if v == "" {
		return rule.Invalidf(field, "required")
	}
	return nil
}

// ClaimCreateBody is `tally claim create -`'s document.
type ClaimCreateBody struct {
	Claim        string           `json:"claim"`
	Respondent   string           `json:"respondent"`
	Work         string           `json:"work"`
	Scope        string           `json:"scope,omitempty"`
	MaxResponses int              `json:"max_responses,omitempty"`
	Deadline     string           `json:"deadline,omitempty"`
	DependsOn    []string         `json:"depends_on,omitempty"`
	Awaits       []string         `json:"awaits,omitempty"`
	Reviews      []string         `json:"reviews,omitempty"`
	DerivedFrom  []string         `json:"derived_from,omitempty"`
	Predecessor  string           `json:"predecessor,omitempty"`
	Slots        []claim.SlotSpec `json:"slots"`
}

func (s *Server) claimCreate(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusCreated, func(body []byte, _ string, _ principal) (claim.Command, error) {
		var d ClaimCreateBody
		if err := jsondoc.Strict("body", body, &d); err != nil {
			return nil, err
		}
		cmd := claim.Create{Claim: d.Claim, Respondent: d.Respondent, Work: d.Work, Scope: d.Scope,
			MaxResponses: d.MaxResponses, DependsOn: d.DependsOn, Awaits: d.Awaits, Reviews: d.Reviews,
			DerivedFrom: d.DerivedFrom, Predecessor: d.Predecessor, Slots: d.Slots}
		if d.Deadline != "" {
			t, err := promise.ParseDeadline("deadline", d.Deadline, s.cfg.Ledger.Now())
			if err != nil {
				return nil, err
			}
			cmd.Deadline = t
		}
		return cmd, nil
	})
}

func (s *Server) claimPost(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim  string `json:"claim"`
			Failed bool   `json:"failed,omitempty"`
			Reason string `json:"reason,omitempty"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		if d.Failed {
			return claim.ReportPostFailure{Claim: id, Reason: d.Reason}, nil
		}
		return claim.Post{Claim: id}, nil
	})
}

func (s *Server) claimEnd(verb string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
			var d struct {
				Claim  string `json:"claim"`
				Reason string `json:"reason,omitempty"`
			}
			if err := claimDoc(body, id, &d.Claim, &d); err != nil {
				return nil, err
			}
			if verb == "revoke" {
				return claim.Revoke{Claim: id, Reason: d.Reason}, nil
			}
			return claim.Cancel{Claim: id, Reason: d.Reason}, nil
		})
	}
}

func (s *Server) claimSupersede(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim     string `json:"claim"`
			Successor string `json:"successor"`
			Reason    string `json:"reason,omitempty"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		return claim.Supersede{Claim: id, Successor: d.Successor, Reason: d.Reason}, nil
	})
}

func (s *Server) claimReceipt(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim   string `json:"claim"`
			Decline bool   `json:"decline,omitempty"`
			Reason  string `json:"reason,omitempty"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		if d.Decline {
			return claim.DeclineReceipt{Claim: id, Reason: d.Reason}, nil
		}
		return claim.AcquireReceipt{Claim: id}, nil
	})
}

func (s *Server) claimAdopt(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim  string `json:"claim"`
			Holder string `json:"holder"`
			Reason string `json:"reason,omitempty"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		return claim.Adopt{Claim: id, Holder: d.Holder, Reason: d.Reason}, nil
	})
}

func (s *Server) claimProgress(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim      string `json:"claim"`
			Generation uint64 `json:"generation"`
			Note       string `json:"note"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		return claim.Progress{Claim: id, Generation: d.Generation, Note: d.Note}, nil
	})
}

// ClaimTestamentBody is `tally testament close -`'s document.
type ClaimTestamentBody struct {
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

func (s *Server) claimTestamentClose(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d ClaimTestamentBody
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		switch {
		case d.Failed:
			return claim.FailTestament{Claim: id, Generation: d.Generation, Reason: d.Reason}, nil
		case d.Role == claim.TestamentResult:
			return claim.ResultTestament{Claim: id, Testament: d.Testament, Summary: d.Summary, Confidence: d.Confidence, Results: d.Results}, nil
		case d.Role == "" || d.Role == claim.TestamentResponse:
			if d.Outcome == "" {
				d.Outcome = string(claim.Complete)
			}
			if d.Generation == 0 {
				return nil, rule.Invalidf("generation", "required: the receipt generation you hold")
			}
			return claim.CloseTestament{Claim: id, Testament: d.Testament, Generation: d.Generation,
				Outcome: claim.Outcome(d.Outcome), Summary: d.Summary, Confidence: d.Confidence,
				Bindings: d.Bindings, Diagnostics: d.Diagnostics}, nil
		}
		return nil, rule.Invalidf("role", "must be response or result")
	})
}

// claimFact commits a fact the ledger checks: a passed deadline (only the
// timekeeper-role token, which acts as the ledger's timekeeper) or a failed
// dependency. The built-in watcher commits both; these routes are for a
// timekeeper outside the server, and to repair a log that lacks them.
func (s *Server) claimFact(deadline bool) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
			var d struct {
				Claim string `json:"claim"`
			}
			if err := claimDoc(body, id, &d.Claim, &d); err != nil {
				return nil, err
			}
			if deadline {
				return claim.CommitDeadline{Claim: id}, nil
			}
			return claim.CommitDependency{Claim: id}, nil
		})
	}
}

func (s *Server) claimTestamentStep(verb string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
			var d struct {
				Claim     string `json:"claim"`
				Testament string `json:"testament"`
			}
			if err := claimDoc(body, id, &d.Claim, &d); err != nil {
				return nil, err
			}
			t := r.PathValue("testament")
			if d.Testament != "" && d.Testament != t {
				return nil, rule.Invalidf("testament", "names "+strconv.Quote(d.Testament)+" but the path names "+strconv.Quote(t))
			}
			if verb == "receive" {
				return claim.ReceiveTestament{Claim: id, Testament: t}, nil
			}
			return claim.PostTestament{Claim: id, Testament: t}, nil
		})
	}
}

// ClaimCheckBody is `tally check begin -` and `tally check report -`'s
// document, without what only a local run can do (evidence_file, command,
// timeout): evidence over HTTP is an artifact PUT first.
type ClaimCheckBody struct {
	Check          string `json:"check"`
	Claim          string `json:"claim"`
	Artifact       string `json:"artifact,omitempty"`
	Digest         string `json:"digest,omitempty"`
	Result         string `json:"result,omitempty"`
	Evidence       string `json:"evidence,omitempty"`
	EvidenceDigest string `json:"evidence_digest,omitempty"`
	Note           string `json:"note,omitempty"`
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

func (s *Server) claimCheck(verb string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		s.claimWriteGuarded(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
			var d ClaimCheckBody
			if err := claimDoc(body, id, &d.Claim, &d); err != nil {
				return nil, err
			}
			check := r.PathValue("check")
			if d.Check != "" && d.Check != check {
				return nil, rule.Invalidf("check", "names "+strconv.Quote(d.Check)+" but the path names "+strconv.Quote(check))
			}
			if err := needField("artifact", d.Artifact); err != nil {
				return nil, err
			}
			if verb == "begin" {
				if d.Result != "" || d.Evidence != "" || d.EvidenceDigest != "" || d.Note != "" {
					return nil, rule.Invalidf("result", "begin takes only artifact and digest")
				}
				return claim.BeginCheck{Claim: id, Check: check, Artifact: d.Artifact, Digest: d.Digest}, nil
			}
			switch claim.Result(d.Result) {
			case claim.Pass, claim.Fail, claim.Incomplete, claim.Error:
			default:
				return nil, rule.Invalidf("result", "must be pass, fail, incomplete or error")
			}
			if err := needField("evidence", d.Evidence); err != nil {
				return nil, err
			}
			return claim.ReportVerdict{Claim: id, Check: check, Artifact: d.Artifact, Digest: d.Digest,
				Result: claim.Result(d.Result), Evidence: d.Evidence, EvidenceDigest: d.EvidenceDigest, Note: d.Note}, nil
		}, s.guardTarget(r.Context()))
	}
}

func (s *Server) claimArtifactReceive(w http.ResponseWriter, r *http.Request) {
	s.claimWrite(w, r, http.StatusOK, func(body []byte, id string, _ principal) (claim.Command, error) {
		var d struct {
			Claim    string `json:"claim"`
			Artifact string `json:"artifact"`
			Digest   string `json:"digest,omitempty"`
		}
		if err := claimDoc(body, id, &d.Claim, &d); err != nil {
			return nil, err
		}
		a := r.PathValue("artifact")
		if d.Artifact != "" && d.Artifact != a {
			return nil, rule.Invalidf("artifact", "names "+strconv.Quote(d.Artifact)+" but the path names "+strconv.Quote(a))
		}
		return claim.ReceiveArtifact{Claim: id, Artifact: a, Digest: d.Digest}, nil
	})
}

func (s *Server) objects() (*artifact.Store, error) {
	return artifact.OpenStore(store.ObjectsDir(s.cfg.Root))
}

// bytesWrite is the preamble of a route whose body is bytes and whose
// description is in the query: the session, an octet-stream body, and only
// the named parameters. It has answered the request when ok is false.
func (s *Server) bytesWrite(w http.ResponseWriter, r *http.Request, what string, params ...string) (p principal, l *ledger.Ledger, q url.Values, ok bool) {
	p, l, err := s.openSession(r)
	if err != nil {
		s.writeError(w, err)
		return p, nil, nil, false
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/octet-stream" {
		writeDoc(w, http.StatusUnsupportedMediaType, jsondoc.Error("Content-Type: must be application/octet-stream", "invalid"))
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
	switch claim.Result(q.Get("result")) {
	case claim.Pass, claim.Fail, claim.Incomplete, claim.Error:
	default:
		s.writeError(w, rule.Invalidf("result", "must be pass, fail, incomplete or error"))
		return
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
	objs, err := s.objects()
	if err != nil {
		s.writeError(w, err)
		return
	}
	content, size, err := objs.Put(r.Context(), r.Body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cmd.Publish = &claim.PublishArtifact{Claim: id, Artifact: q.Get("evidence"), Role: claim.RoleResult, Kind: kind,
		Schema: q.Get("schema"), Name: name, Content: content, Size: size}
	digestBody := []byte(r.URL.RawQuery + "\n" + content.String())
	s.execute(w, r, p, l, digestBody, ledger.Command{Claim: cmd}, http.StatusOK, s.renderClaim(id))
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
	role, slot := q.Get("role"), q.Get("slot")
	switch {
	case role != "":
	case slot != "":
		role = string(claim.RoleOutput)
	case gen > 0:
		role = string(claim.RoleDiagnostic)
	default:
		role = string(claim.RoleResult)
	}
	kind, name := q.Get("kind"), q.Get("name")
	if kind == "" {
		kind = "file"
	}
	id, a := r.PathValue("id"), r.PathValue("artifact")
	if name == "" {
		name = a
	}
	objs, err := s.objects()
	if err != nil {
		s.writeError(w, err)
		return
	}
	content, size, err := objs.Put(r.Context(), r.Body)
	if err != nil {
		s.writeError(w, err)
		return
	}
	cmd := claim.PublishArtifact{Claim: id, Artifact: a, Role: claim.Role(role), Slot: slot, Kind: kind,
		Schema: q.Get("schema"), Name: name, Generation: gen, Content: content, Size: size}
	// The digest binds the request id to the description and the content.
	digestBody := []byte(r.URL.RawQuery + "\n" + content.String())
	s.execute(w, r, p, l, digestBody, ledger.Command{Claim: cmd}, http.StatusCreated, s.renderClaim(id))
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
	l.Read(func(st *ledger.State, _ store.Position) { list = st.Claims.List(f, now) })
	b, err := json.Marshal(list)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("now", jsondoc.S(claim.FormatTime(now))), jsondoc.M("claims", b)))
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
	l.Read(func(st *ledger.State, _ store.Position) { v, ok = st.Claims.Claim(id, now) })
	if !ok {
		s.writeError(w, rule.NotFoundf("claim", "no claim "+strconv.Quote(id)))
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeDoc(w, http.StatusOK, jsondoc.Doc(jsondoc.M("now", jsondoc.S(claim.FormatTime(now))), jsondoc.M("claim", b)))
}
