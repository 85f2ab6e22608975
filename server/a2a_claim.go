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
// Every verb runs through the server's Service with the action's api
// document, the message's request id binding it; the task is mapped from
// the write's response document, so a retry gets the same task.
//
// A claim is a task with the claim's id; its state, status message and
// artifacts are package a2atask's (ClaimState, ClaimTask).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strconv"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/zeebo/blake3"

	"tally/a2atask"
	"tally/api"
	"tally/refuse"
	"tally/service"
	"tally/verb"
)

// a2aClaimActions are the claim verbs over A2A and REST
// (a2atask.ClaimActions): every rule and default is the claim core's.
var a2aClaimActions = a2atask.ClaimActions()

// claimInput is the verb of the table a claim record's action runs and
// its input: the document decoded, and for the actions that carry bytes,
// the message's one raw file part (file): an artifact's, named by the
// document, else the part's filename; a verdict's evidence, published as
// the evaluator's result artifact (d.evidence, else an id derived from the
// request, so a retry names the same) in the verdict's own write.
func claimInput(action string, c service.Call, body []byte, file *a2a.Part) (verb.Verb, verb.Input, error) {
	v := a2aVerb("claim", action)
	d := reflect.New(v.Request)
	if err := api.Decode("", body, d.Interface()); err != nil {
		return v, verb.Input{}, err
	}
	if file == nil {
		return v, verb.Input{Doc: d.Interface()}, nil // a verdict's evidence is an artifact published before
	}
	switch p := d.Interface().(type) {
	case *api.ClaimPublish:
		p.Name = cmp.Or(p.Name, file.Filename)
		return v, verb.Input{Doc: p, Body: fileBytes(file)}, nil
	case *api.ClaimCheck:
		if p.Evidence == "" {
			sum := blake3.Sum256([]byte("evidence\n" + c.Actor + "\n" + c.RequestID))
			p.Evidence = "ev_" + hex.EncodeToString(sum[:6])
		}
		return verb.Of(verb.ClaimCheckEvidence), verb.Input{Doc: verb.Evidence{Check: *p, Name: file.Filename}, Body: fileBytes(file)}, nil
	}
	return v, verb.Input{}, fmt.Errorf("%w: claim action %s takes no bytes", a2a.ErrInternalError, action)
}

func fileBytes(p *a2a.Part) io.Reader { return bytes.NewReader(p.Content.(a2a.Raw)) }

// sendClaim runs one claim record of a SendMessage through the Service.
func (h *a2aHandler) sendClaim(ctx context.Context, c *a2aCall, req *a2a.SendMessageRequest, uri, key string, raw any) (a2a.SendMessageResult, error) {
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
	// The record is refused here, under its own name, for what its
	// document says; the Service refuses what the ledger's rules do.
	if _, err := act.Build(where, body, h.s.cfg.Ledger.Now()); err != nil {
		return nil, refuseAt(where, err)
	}
	var file *a2a.Part
	switch act.Name {
	case "artifact.publish", "check.report":
		n := rawParts(msg)
		if n == 0 && act.Name == "check.report" {
			break // the evidence is an artifact published before
		}
		if n != 1 {
			return nil, a2atask.InvalidParams("message.parts", act.Name+" takes the artifact's bytes as exactly one file part with raw bytes; the message has "+strconv.Itoa(n))
		}
		if act.Name == "check.report" && stringMember(rec.Obj, "evidence_digest") != "" {
			return nil, a2atask.InvalidParams(where+".evidence_digest", "is the digest of the bytes the message carries: leave it out")
		}
		for _, p := range msg.Parts {
			if _, ok := p.Content.(a2a.Raw); ok {
				file = p
			}
		}
	}
	var party string
	if act.Name == "create" {
		party = claimParty(&api.ClaimCreate{Claimant: stringMember(rec.Obj, "claimant")})
	}
	call, err := h.writeCall(c, party, c.sendRequestID(msg))
	if err != nil {
		return nil, err
	}
	v, in, err := claimInput(act.Name, call, body, file)
	if err != nil {
		return nil, a2aError(err)
	}
	res, err := v.Call(ctx, h.s.local, call, in)
	if err != nil {
		return nil, a2aError(err)
	}
	return h.claimTask(c, res, []string{a2atask.RecordKey(uri, a2atask.FamilyClaim)})
}

// stringMember is a record's member name when it is a string.
func stringMember(obj map[string]any, name string) string {
	s, _ := obj[name].(string)
	return s
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

// claimTask is the task of a claim write's response document: the claim's
// task after the write, the records appended under "<key>/records", and
// what the write says beside them under "<key>/notes". Mapped from the
// document, a retry answered with the recorded one gets the same task.
func (h *a2aHandler) claimTask(c *a2aCall, doc service.Doc, keys []string) (*a2a.Task, error) {
	res, err := service.ReadClaimWritten(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", a2a.ErrInternalError, err)
	}
	if res.Claim.Claim == "" {
		return nil, fmt.Errorf("%w: the response names no claim", a2a.ErrInternalError)
	}
	t := a2atask.ClaimTask(&res.Claim, c.contextID(), keys, c.sessionURL)
	recs := make([]json.RawMessage, len(res.Records))
	for i, r := range res.Records {
		recs[i] = r.Line
	}
	a2atask.WithRecords(t, keys, recs, res.Notes)
	return t, nil
}

// findClaim is the claim id in the request's session, or nil.
func (h *a2aHandler) findClaim(ctx context.Context, c *a2aCall, id string) (*service.ClaimShown, error) {
	res, err := h.s.local.Claim(ctx, h.readCall(c), id)
	if err == nil {
		return &res, nil
	}
	if r, ok := refuse.As(err); ok && r.Code == refuse.NotFound {
		return nil, nil
	}
	return nil, a2aError(err)
}

// cancelClaim ends a claim as the caller: Cancelled, with the reason from
// the request's metadata "reason" (or a record's under a claim key). The
// claim core refuses anyone but the claimant, and a claim already ended
// (NotCancelable).
func (h *a2aHandler) cancelClaim(ctx context.Context, c *a2aCall, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	keys := h.keysOf(c, a2atask.FamilyClaim)
	call, err := h.writeCall(c, "", c.requestID)
	if err != nil {
		return nil, err
	}
	res, err := h.s.local.CancelClaim(ctx, call, api.ClaimEnd{Claim: string(req.ID), Reason: a2atask.CancelReason(c.cancelRequestMetadata(req), keys)})
	if err != nil {
		if r, ok := refuse.As(err); ok && r.Field == "reason" {
			return nil, a2atask.InvalidParams("reason", r.Rule+": cancelling a claim needs a reason, put it in the request's metadata.reason")
		}
		return nil, cancelError(err)
	}
	return h.claimTask(c, res.Doc, keys)
}
