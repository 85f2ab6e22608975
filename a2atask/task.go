package a2atask

import (
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/claim"
	"tally/expect"
	"tally/promise"
)

// FindPromise returns the promise whose task id is task among views in
// declaration order (a list the Service answers): the first declared with
// that task field, else the one with that id.
func FindPromise(vs []promise.View, task string) (*promise.View, bool) {
	for i := range vs {
		if vs[i].Task == task {
			return &vs[i], true
		}
	}
	for i := range vs {
		if vs[i].ID == task {
			return &vs[i], true
		}
	}
	return nil, false
}

// PromiseTaskID is a promise's task id: its task field when set, else its
// id.
func PromiseTaskID(v *promise.View) a2a.TaskID {
	if v.Task != "" {
		return a2a.TaskID(v.Task)
	}
	return a2a.TaskID(v.ID)
}

// PromiseTask is the task of a promise view, in contextID (the session's,
// "tenant/session"), the view under each of keys, in its state
// (PromiseState) since it was resolved, else since it was declared. A
// satisfied promise has one artifact "evidence" with a text part per
// reference; a cancelled one says its reason in the status message, a
// released one its reason if it has one, an expired one its antecedent.
func PromiseTask(v *promise.View, contextID string, keys []string) *a2a.Task {
	ts := v.Declared
	if !v.ResolvedAt.IsZero() {
		ts = v.ResolvedAt
	}
	t := recordTask(PromiseTaskID(v), contextID, keys, json.RawMessage(v.AppendJSON(nil)), PromiseState(v.State), ts)
	switch v.State {
	case promise.Satisfied:
		parts := make(a2a.ContentParts, 0, len(v.Evidence))
		for _, ref := range v.Evidence {
			parts = append(parts, a2a.NewTextPart(ref))
		}
		t.Artifacts = []*a2a.Artifact{{ID: a2a.ArtifactID("evidence-" + v.ID), Name: "evidence",
			Description: "the evidence references the debtor resolved " + v.ID + " with", Parts: parts}}
	case promise.Cancelled:
		statusText(t, v.ID, string(v.State), v.Reason)
	case promise.Released:
		if v.Reason != "" {
			statusText(t, v.ID, string(v.State), v.Reason)
		}
	case promise.Expired:
		statusText(t, v.ID, string(v.State), "antecedent "+v.On+" can no longer be satisfied")
	}
	return t
}

// ClaimTask is the task of a claim view: its id the claim's, in contextID,
// the view under each of keys, in its state (ClaimState) since it ended,
// else since it was created. A terminal claim says the ledger's reason in
// the status message, an open one what it waits on (its why, one line
// each). A satisfied claim's artifacts are each slot's witness and the
// received testament; sessionURL is where the witnesses' file parts point
// ("" for none: offline there is no server to fetch bytes from).
func ClaimTask(v *claim.View, contextID string, keys []string, sessionURL string) *a2a.Task {
	rec, err := json.Marshal(v)
	if err != nil {
		rec = []byte("null")
	}
	since := v.Created
	if v.Terminal != nil {
		since = v.Terminal.TS
	}
	ts, _ := time.Parse(time.RFC3339Nano, since)
	t := recordTask(a2a.TaskID(v.Claim), contextID, keys, rec, ClaimState(v), ts)
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
// data part naming it exactly and, given sessionURL, a file part with the
// URL of its bytes (read with a bearer token; served only when they match
// the recorded content digest), then the received testament, so there is
// always at least one.
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

// OriginTaskOf is the task of an origin of expectations: its state from
// its outcome (OriginState), in the context the expectations name (else
// contextID), the document {"taskId","outcome"?,"expectations":[views]}
// under each of keys; ended says an outcome is recorded.
func OriginTaskOf(task string, views []expect.View, out expect.Outcome, ended bool, contextID string, keys []string) *a2a.Task {
	ctx := contextID
	for _, v := range views {
		if v.Origin != nil && v.Origin.ContextID != "" {
			ctx = v.Origin.ContextID
			break
		}
	}
	doc := map[string]any{"taskId": task, "expectations": views}
	if ended {
		doc["outcome"] = string(out)
	}
	rec, _ := json.Marshal(doc)
	t := &a2a.Task{ID: a2a.TaskID(task), ContextID: ctx, Status: a2a.TaskStatus{State: OriginState(out)}, Metadata: map[string]any{}}
	for _, k := range keys {
		t.Metadata[k] = json.RawMessage(rec)
	}
	return t
}

// recordTask is the task of one ledger record: in state since ts, the
// record under each of keys.
func recordTask(id a2a.TaskID, contextID string, keys []string, rec json.RawMessage, state a2a.TaskState, ts time.Time) *a2a.Task {
	t := &a2a.Task{ID: id, ContextID: contextID, Metadata: map[string]any{}, Status: a2a.TaskStatus{State: state, Timestamp: &ts}}
	for _, k := range keys {
		t.Metadata[k] = rec
	}
	return t
}

// statusText puts text in a task's status message, whose id is derived
// from the record and its state so that every read gives the same message.
func statusText(t *a2a.Task, record, state, text string) {
	t.Status.Message = &a2a.Message{ID: "tally-status-" + record + "-" + state, Role: a2a.MessageRoleAgent,
		TaskID: t.ID, ContextID: t.ContextID, Parts: a2a.ContentParts{a2a.NewTextPart(text)}}
}

// WithWarnings adds what a write warned of under "<key>/warnings" for each
// of keys (nothing when there are none).
func WithWarnings(t *a2a.Task, keys []string, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	for _, k := range keys {
		t.Metadata[k+"/warnings"] = warnings
	}
}

// WithRecords adds the records a write appended under "<key>/records" for
// each of keys, and what the write says beside them under "<key>/notes"
// (when it says anything).
func WithRecords(t *a2a.Task, keys []string, records []json.RawMessage, notes []string) {
	for _, k := range keys {
		t.Metadata[k+"/records"] = records
		if len(notes) > 0 {
			t.Metadata[k+"/notes"] = notes
		}
	}
}
