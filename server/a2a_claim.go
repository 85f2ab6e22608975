package server

// Claims over A2A. A SendMessage carrying a record in
// metadata[<claim URI>] (urn:tally:ext:claim unless A2AConfig.ClaimURI
// says otherwise, activated in A2A-Extensions) runs one claim verb as the
// caller. The record is the document the verb's HTTP JSON API route takes
// (and `tally … -` reads on stdin), decoded by the same strict decoder,
// plus "action":
//
//	create (default)   claim, respondent, work, scope, max_responses, deadline,
//	                   depends_on, awaits, reviews, derived_from, predecessor, slots,
//	                   no_checks
//	post               claim, failed, reason
//	cancel, revoke     claim, reason
//	supersede          claim, successor, reason
//	receipt.acquire    claim, decline, reason
//	receipt.adopt      claim, holder, reason
//	progress           claim, generation, note
//	testament.close    claim, testament, role, generation, outcome (default
//	                   complete), summary, confidence, bindings, diagnostics,
//	                   results, failed, reason
//	testament.post     claim, testament
//	testament.receive  claim, testament
//	deadline.commit    claim (a timekeeper-role token: Expired or Deadlocked)
//	dependency.commit  claim (DependencyFailed, when it holds)
//	check.begin        claim, check, artifact, digest
//	check.report       claim, check, artifact, digest, result, evidence,
//	                   evidence_digest, note; with one file part of raw
//	                   bytes, those bytes are the evidence, published
//	                   (as evidence, or a fresh id) in the verdict's write
//	artifact.publish   claim, artifact, role, slot, kind, schema, name,
//	                   generation; the bytes are the message's one file part
//	                   with raw bytes
//	artifact.receive   claim, artifact, digest
//
// "claim" defaults to the message's taskId (a claim's task id is its id);
// when both are given they must agree. The acting identity is always the
// caller's token: a claim's claimant is whoever creates it, and every rule
// (only the claimant posts, only the respondent takes the receipt, only the
// holder writes under it, only the designated evaluator reports) is the
// claim core's, judged against that identity. The answer is the claim's task
// after the write, with the records appended under "<key>/records" (and
// under "<key>/notes" what the write says beside them: that a successor
// inherited its predecessor's slots and checks); a retry
// of the same message (same messageId, or Idempotency-Key) is answered with
// the recorded task and appends nothing.
//
// A claim is a task with the claim's id; its state, status message and
// artifacts are package a2atask's (ClaimState, ClaimTask).

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
	"tally/claim"
	"tally/ledger"
	"tally/rule"
)

// a2aClaimActions are the claim verbs over A2A and REST
// (a2atask.ClaimActions): every rule and default is the claim core's.
var a2aClaimActions = a2atask.ClaimActions()

// sendClaim executes one claim record of a SendMessage.
func (h *a2aHandler) sendClaim(ctx context.Context, c *a2aCall, l *ledger.Ledger, req *a2a.SendMessageRequest, uri, key string, raw any) (a2a.SendMessageResult, error) {
	msg := req.Message
	rec, err := a2atask.ReadRecord(a2aClaimActions, key, raw, "a claim record")
	if err != nil {
		return nil, err
	}
	where, act := rec.Where, rec.Action
	id, err := a2atask.RecordClaim(where, rec.Obj, msg.TaskID)
	if err != nil {
		return nil, err
	}
	body, err := rec.Body(map[string]any{"claim": id})
	if err != nil {
		return nil, err
	}
	cmd, err := act.Build(where, body, h.s.cfg.Ledger.Now())
	if err != nil {
		return nil, refuseAt(where, err)
	}
	// A check's target is verified in the content store first (before any
	// evidence about it is stored), as over the HTTP JSON API: the core does
	// no I/O.
	if err := h.s.guardTarget(ctx)(l, cmd); err != nil {
		return nil, a2aError(err)
	}
	content := ""
	switch c := cmd.(type) {
	case claim.PublishArtifact:
		if c, err = h.withFilePart(ctx, msg, c, act.Name); err != nil {
			return nil, err
		}
		cmd, content = c, c.Content.String()
	case claim.ReportVerdict:
		if rawParts(msg) == 0 {
			break // the evidence is an artifact published before
		}
		if c.EvidenceDigest != "" {
			return nil, a2atask.InvalidParams(where+".evidence_digest", "is the digest of the bytes the message carries: leave it out")
		}
		id := c.Evidence
		if id == "" {
			id = "ev_" + ledger.MintID()[4:]
		}
		pa, err := h.withFilePart(ctx, msg, claim.PublishArtifact{Claim: c.Claim, Artifact: id, Role: claim.RoleResult, Kind: "evidence"}, act.Name)
		if err != nil {
			return nil, err
		}
		c.Evidence, c.Publish = "", &pa
		cmd, content = c, pa.Content.String()
	}
	digest := a2aDigest("SendMessage", c.contextID(), uri, act.Name, string(body), content)
	keys := []string{a2atask.RecordKey(uri, a2atask.FamilyClaim)}
	resp, err := h.write(ctx, c, l, ledger.Command{Claim: cmd}, c.sendRequestID(msg), digest, h.claimAnswer(c, id, keys, cmd))
	if err != nil {
		return nil, a2aError(err)
	}
	return decodeAnswer[a2a.Task](resp)
}

// withFilePart stores the bytes of the message's one raw file part in the
// content store and puts them in an artifact.publish command; a record
// without a name takes the part's filename. As with PUT …/artifacts, bytes
// stored for a command the ledger then refuses stay in the content store
// (it is content-addressed) and the log gets nothing.
func (h *a2aHandler) withFilePart(ctx context.Context, msg *a2a.Message, pa claim.PublishArtifact, action string) (claim.PublishArtifact, error) {
	var file *a2a.Part
	for _, p := range msg.Parts {
		if _, ok := p.Content.(a2a.Raw); ok {
			file = p
		}
	}
	if n := rawParts(msg); n != 1 {
		return pa, a2atask.InvalidParams("message.parts", action+" takes the artifact's bytes as exactly one file part with raw bytes; the message has "+strconv.Itoa(n))
	}
	var err error
	pa.Content, pa.Size, err = h.s.putBytes(ctx, bytes.NewReader(file.Content.(a2a.Raw)))
	if err != nil {
		return pa, a2aError(err)
	}
	if pa.Name == "" {
		pa.Name = file.Filename
	}
	if pa.Name == "" {
		pa.Name = pa.Artifact
	}
	return pa, nil
}

// rawParts counts the message's file parts with raw bytes.
func rawParts(msg *a2a.Message) int {
	n := 0
	for _, p := range msg.Parts {
		if _, ok := p.Content.(a2a.Raw); ok {
			n++
		}
	}
	return n
}

// claimAnswer renders a claim write's answer: the claim's task after the
// write, the records appended under "<key>/records", and what the write of
// cmd says beside them (ClaimNotes) under "<key>/notes".
func (h *a2aHandler) claimAnswer(c *a2aCall, id string, keys []string, cmd claim.Command) func(*ledger.State, []ledger.Result) []byte {
	return func(st *ledger.State, res []ledger.Result) []byte {
		v, ok := st.Claims.Claim(id, h.s.cfg.Ledger.Now().UTC())
		if !ok {
			return []byte("{}")
		}
		t := a2atask.ClaimTask(&v, c.contextID(), keys, c.sessionURL)
		recs := make([]json.RawMessage, len(res))
		for i, r := range res {
			recs[i] = r.Line
		}
		a2atask.WithRecords(t, keys, recs, ClaimNotes(cmd, &v))
		b, _ := json.Marshal(t)
		return b
	}
}

// cancelClaim ends a claim as the caller: Cancelled, with the reason from
// the request's metadata "reason" (or a record's under a claim key). The
// claim core refuses anyone but the claimant, and a claim already ended
// (NotCancelable).
func (h *a2aHandler) cancelClaim(ctx context.Context, c *a2aCall, l *ledger.Ledger, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	id := string(req.ID)
	keys := h.keysOf(c, a2atask.FamilyClaim)
	reason := a2atask.CancelReason(c.cancelRequestMetadata(req), keys)
	digest := a2aDigest("CancelTask", c.contextID(), "claim", id, reason)
	resp, err := h.write(ctx, c, l, ledger.Command{Claim: claim.Cancel{Claim: id, Reason: reason}}, c.requestID, digest, h.claimAnswer(c, id, keys, nil))
	if err != nil {
		if r, ok := rule.As(err); ok && r.Field == "reason" {
			return nil, a2atask.InvalidParams("reason", r.Rule+": cancelling a claim needs a reason, put it in the request's metadata.reason")
		}
		return nil, cancelError(err)
	}
	return decodeAnswer[a2a.Task](resp)
}
