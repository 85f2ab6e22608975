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
// Task states (a task is a view of one claim; its id is the claim's):
//
//	Generated, Posted                      → TASK_STATE_SUBMITTED (issued; nobody holds the work yet)
//	Received, Progressed,
//	TestamentGenerated,
//	TestamentAcknowledged, Validating      → TASK_STATE_WORKING
//	Satisfied                              → TASK_STATE_COMPLETED: an artifact per slot witness,
//	                                         and one for the received testament
//	ReceiptFailed                          → TASK_STATE_REJECTED (the respondent declined the work)
//	ValidationIncomplete decided by a
//	response whose outcome is refused      → TASK_STATE_REJECTED
//	Cancelled, Revoked, Superseded         → TASK_STATE_CANCELED (the claimant withdrew the work)
//	PostFailed, TestamentGenerationFailed,
//	ValidationIncomplete (otherwise),
//	ValidationFailed, ValidationErrored,
//	Expired, DependencyFailed, Deadlocked  → TASK_STATE_FAILED
//
// Every terminal state carries the ledger's reason in the status message;
// an open claim's says what it waits on (its view's why, one line each).
// Overdue is not a state: the record says "overdue". Cancelled maps to
// CANCELED, not REJECTED as a promise's cancellation does, because a claim
// is cancelled by its claimant, the party that asked for the work (A2A's
// CANCELED), whereas a promise is cancelled by its debtor, the party doing
// it (A2A's REJECTED, here ReceiptFailed).

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/api"
	"tally/claim"
	"tally/ledger"
	"tally/rule"
)

// a2aClaimActions are the claim verbs over A2A and REST (api.ClaimActions):
// every rule and default is the claim core's.
var a2aClaimActions = api.ClaimActions()

// sendClaim executes one claim record of a SendMessage.
func (h *a2aHandler) sendClaim(ctx context.Context, c *a2aCall, l *ledger.Ledger, req *a2a.SendMessageRequest, uri, key string, raw any) (a2a.SendMessageResult, error) {
	msg := req.Message
	rec, err := readRecord(a2aClaimActions, key, raw, "a claim record")
	if err != nil {
		return nil, err
	}
	where, act := rec.where, rec.action
	id, err := recordClaim(where, rec.obj, msg)
	if err != nil {
		return nil, err
	}
	doc := maps.Clone(rec.obj)
	delete(doc, "action")
	doc["claim"] = id
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, invalidParams(where, "must be a JSON object")
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
			return nil, invalidParams(where+".evidence_digest", "is the digest of the bytes the message carries: leave it out")
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
	keys := []string{a2aRecordKey(uri, familyClaim)}
	resp, err := h.write(ctx, c, l, ledger.Command{Claim: cmd}, c.sendRequestID(msg), digest, h.claimAnswer(c, id, keys, cmd))
	if err != nil {
		return nil, a2aError(err)
	}
	return decodeAnswer[a2a.Task](resp)
}

// recordClaim is the claim a record is about: its "claim" member, else the
// message's taskId. When both are given they must agree.
func recordClaim(where string, obj map[string]any, msg *a2a.Message) (string, error) {
	task := string(msg.TaskID)
	v, given := obj["claim"]
	if !given {
		if task == "" {
			return "", invalidParams(where+".claim", "names the claim (or send the message in its task: message.taskId)")
		}
		return task, nil
	}
	id, ok := v.(string)
	switch {
	case !ok:
		return "", invalidParams(where+".claim", "must be a string")
	case task != "" && id != task:
		return "", invalidParams(where+".claim", "names "+strconv.Quote(id)+" but message.taskId names "+strconv.Quote(task))
	}
	return id, nil
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
		return pa, invalidParams("message.parts", action+" takes the artifact's bytes as exactly one file part with raw bytes; the message has "+strconv.Itoa(n))
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
		t := claimTaskOf(&v, c.contextID(), keys, c.sessionURL)
		recs := make([]json.RawMessage, len(res))
		for i, r := range res {
			recs[i] = r.Line
		}
		notes := ClaimNotes(cmd, &v)
		for _, k := range keys {
			t.Metadata[k+"/records"] = recs
			if len(notes) > 0 {
				t.Metadata[k+"/notes"] = notes
			}
		}
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
	keys := h.keysOf(c, familyClaim)
	reason := cancelReason(c.cancelRequestMetadata(req), keys)
	digest := a2aDigest("CancelTask", c.contextID(), "claim", id, reason)
	resp, err := h.write(ctx, c, l, ledger.Command{Claim: claim.Cancel{Claim: id, Reason: reason}}, c.requestID, digest, h.claimAnswer(c, id, keys, nil))
	if err != nil {
		if r, ok := rule.As(err); ok && r.Field == "reason" {
			return nil, invalidParams("reason", r.Rule+": cancelling a claim needs a reason, put it in the request's metadata.reason")
		}
		return nil, cancelError(err)
	}
	return decodeAnswer[a2a.Task](resp)
}

// a2aClaimState maps a claim's state to a task state (the table in this
// file's comment). A terminal state not named there is FAILED.
func a2aClaimState(v *claim.View) a2a.TaskState {
	switch v.State {
	case claim.Generated, claim.Posted:
		return a2a.TaskStateSubmitted
	case claim.Satisfied:
		return a2a.TaskStateCompleted
	case claim.ReceiptFailed:
		return a2a.TaskStateRejected
	case claim.Cancelled, claim.Revoked, claim.Superseded:
		return a2a.TaskStateCanceled
	case claim.ValidationIncomplete:
		if refusedResponse(v) {
			return a2a.TaskStateRejected
		}
	}
	if v.State.Terminal() {
		return a2a.TaskStateFailed
	}
	return a2a.TaskStateWorking
}

// refusedResponse reports whether the response that ended the claim
// reported the outcome refused: the respondent declined the work.
func refusedResponse(v *claim.View) bool {
	if v.Terminal == nil || v.Terminal.Testament == "" {
		return false
	}
	for _, t := range v.Testaments {
		if t.Testament == v.Terminal.Testament {
			return t.Outcome == string(claim.Refused)
		}
	}
	return false
}

// ClaimTask is the A2A task GetTask answers for the claim id in st at now,
// its view under cfg's claim URI; contextID is the session's
// ("tenant/session"). Offline there is no server to fetch artifact bytes
// from, so the artifacts carry no URL. The bool is false when there is no
// such claim. This is the mapping `tally a2a task` prints for a claim.
func ClaimTask(cfg A2AConfig, st *ledger.State, id string, now time.Time, contextID string) (*a2a.Task, bool) {
	v, ok := st.Claims.Claim(id, now.UTC())
	if !ok {
		return nil, false
	}
	return claimTaskOf(&v, contextID, []string{cfg.withDefaults().ClaimURI}, ""), true
}

// claimTaskOf is the A2A task of a claim view: its id the claim's, the view
// under each of keys, in its state since it ended (else since it was
// created). sessionURL is where the artifact parts point ("" for none).
func claimTaskOf(v *claim.View, contextID string, keys []string, sessionURL string) *a2a.Task {
	rec, err := json.Marshal(v)
	if err != nil {
		rec = []byte("null")
	}
	since := v.Created
	if v.Terminal != nil {
		since = v.Terminal.TS
	}
	ts, _ := time.Parse(time.RFC3339Nano, since)
	t := recordTask(a2a.TaskID(v.Claim), contextID, keys, rec, a2aClaimState(v), ts)
	if v.Terminal != nil {
		statusText(t, v.Claim, string(v.State), v.Terminal.Reason)
	} else if len(v.Why) > 0 {
		// An open task says what it waits on, in claim show's words.
		statusText(t, v.Claim, string(v.State), claim.WhyText(v.Why))
	}
	if v.State == claim.Satisfied {
		t.Artifacts = claimArtifacts(v, sessionURL)
	}
	return t
}

// claimArtifacts lists what a satisfied claim delivered: each slot's
// witness (the artifact every Required check of the slot passed on) with a
// data part naming it exactly and a file part with the URL of its bytes
// (read with a bearer token; served only when they match the recorded
// content digest), then the received testament, so there is always at
// least one.
func claimArtifacts(v *claim.View, sessionURL string) []*a2a.Artifact {
	var ids []string
	slots := map[string][]string{}
	witness := map[string]*claim.WitnessView{}
	for _, sl := range v.Slots {
		if w := sl.Witness; w != nil {
			if _, seen := witness[w.Artifact]; !seen {
				ids, witness[w.Artifact] = append(ids, w.Artifact), w
			}
			slots[w.Artifact] = append(slots[w.Artifact], sl.Name)
		}
	}
	var out []*a2a.Artifact
	for _, id := range ids {
		w := witness[id]
		data := map[string]any{"claim": v.Claim, "artifact": id, "digest": w.Digest, "testament": w.Testament, "slots": slots[id]}
		name := id
		for _, av := range v.Artifacts {
			if av.Artifact == id {
				data["content"], data["size"], data["kind"], data["role"] = av.Content, av.Size, av.Kind, av.Role
				if av.Schema != "" {
					data["schema"] = av.Schema
				}
				if av.Name != "" {
					name = av.Name
				}
			}
		}
		parts := a2a.ContentParts{a2a.NewDataPart(data)}
		if sessionURL != "" {
			file := a2a.NewFileURLPart(a2a.URL(sessionURL+"/claims/"+url.PathEscape(v.Claim)+"/artifacts/"+url.PathEscape(id)), "application/octet-stream")
			file.Filename = name
			parts = append(parts, file)
		}
		out = append(out, &a2a.Artifact{ID: a2a.ArtifactID(id), Name: name, Parts: parts,
			Description: "the witness of slot " + strings.Join(slots[id], ", ") + ": every Required check passed on this artifact id and digest"})
	}
	for _, t := range v.Testaments {
		if t.Testament == v.Delivery.Testament {
			data := map[string]any{"claim": v.Claim, "testament": t.Testament, "outcome": t.Outcome, "summary": t.Summary, "bindings": t.Bindings}
			if t.Confidence != nil {
				data["confidence"] = *t.Confidence
			}
			out = append(out, &a2a.Artifact{ID: a2a.ArtifactID("testament/" + t.Testament), Name: "testament " + t.Testament,
				Description: "the closing testament the claimant received", Parts: a2a.ContentParts{a2a.NewDataPart(data)}})
		}
	}
	return out
}
