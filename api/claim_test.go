package api

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"tally/claim"
	"tally/refuse"
)

var testNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// TestClaimRefusals pins the exact words of each claim document's
// refusals: every binding (stdin, a REST body, an A2A record) says them.
func TestClaimRefusals(t *testing.T) {
	for _, tc := range []struct {
		action, body, want string
	}{
		{"create", `{"claim":"C1","colour":1}`, "colour: is not a field of this command (awaits, claim, claimant, deadline, depends_on, derived_from, max_responses, no_checks, pool, predecessor, priority, respondent, reviews, scope, slots, work)"},
		{"create", `{"claim":7}`, "claim: must be a string, not number"},
		{"create", `{"slots":{}}`, "slots: must be an array, not object"},
		{"create", `{"no_checks":"yes"}`, "no_checks: must be true or false, not string"},
		{"create", `{"max_responses":1.5}`, "max_responses: must be a number, not number 1.5"},
		{"create", `{"deadline":"soon"}`, `deadline: "soon" is neither RFC 3339 (2026-09-01T17:00:00Z) nor a duration from now (90m, 2h, 3d, 1w, 1d12h, or ISO 8601 such as PT6H, P1D, P1W, P1DT2H)`},
		{"create", `[]`, "body: must be one JSON object"},
		{"create", ``, "body: must be one JSON object"},
		{"create", `{"claim":"C1"} {}`, "body: invalid JSON at byte offset 15 (line 1, column 16): data after the value"},
		{"create", `{"claim":`, "body: invalid JSON at byte offset 9 (line 1, column 10): expected a value"},
		{"post", `{"claim":"C1","successor":"C2"}`, "successor: is not a field of this command (claim, failed, reason)"},
		{"cancel", `{"reason":["x"]}`, "reason: must be a string, not array"},
		{"supersede", `{"claim":"C1","holder":"x"}`, "holder: is not a field of this command (claim, reason, successor)"},
		{"receipt.acquire", `{"decline":1}`, "decline: must be true or false, not number"},
		{"receipt.adopt", `{"generation":1}`, "generation: is not a field of this command (claim, holder, reason)"},
		{"progress", `{"generation":-1}`, "generation: must be a number, not number -1"},
		{"testament.close", `{"role":"audit"}`, "role: must be response or result"},
		{"testament.close", `{"confidence":"high"}`, "confidence: must be a number, not string"},
		{"testament.close", `{"bindings":[{"slot":1}]}`, "bindings.slot: must be a string, not number"},
		{"testament.post", `{"claim":"C1","outcome":"complete"}`, "outcome: is not a field of this command (claim, testament)"},
		{"deadline.commit", `{"claim":"C1","reason":"x"}`, "reason: is not a field of this command (claim)"},
		{"check.begin", `{"result":"pass"}`, "result: is not a field of this command (artifact, check, claim, digest)"},
		{"check.report", `{"evidence_file":"x"}`, "evidence_file: is not a field of this command (artifact, check, claim, digest, evidence, evidence_digest, note, result)"},
		{"artifact.publish", `{"generation":"1"}`, "generation: must be a number, not string"},
		{"artifact.receive", `{"role":"output"}`, "role: is not a field of this command (artifact, claim, digest)"},
	} {
		act, ok := ClaimActions().Find(tc.action)
		if !ok {
			t.Fatalf("no action %q", tc.action)
		}
		_, err := act.Build("body", []byte(tc.body), testNow)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s %s: got %v, want %q", tc.action, tc.body, err, tc.want)
			continue
		}
		if r, ok := refuse.As(err); !ok || r.Code != refuse.Invalid {
			t.Errorf("%s %s: %v is not an invalid refusal", tc.action, tc.body, err)
		}
	}
}

// TestClaimCommands checks each action makes its verb's command of a
// document, with nothing defaulted here (the claim core defaults).
func TestClaimCommands(t *testing.T) {
	conf := 0.5
	for _, tc := range []struct {
		action, body string
		want         claim.Command
	}{
		{"create", `{"claim":"C1","respondent":"r","work":"w","deadline":"2h","slots":[],"predecessor":"C0","no_checks":true}`,
			claim.Create{Claim: "C1", Respondent: "r", Work: "w", Deadline: testNow.Add(2 * time.Hour), Slots: []claim.SlotSpec{}, Predecessor: "C0", NoChecks: true}},
		{"post", `{"claim":"C1"}`, claim.Post{Claim: "C1"}},
		{"post", `{"claim":"C1","failed":true,"reason":"x"}`, claim.ReportPostFailure{Claim: "C1", Reason: "x"}},
		{"cancel", `{"claim":"C1","reason":"x"}`, claim.Cancel{Claim: "C1", Reason: "x"}},
		{"revoke", `{"claim":"C1","reason":"x"}`, claim.Revoke{Claim: "C1", Reason: "x"}},
		{"supersede", `{"claim":"C1","successor":"C2"}`, claim.Supersede{Claim: "C1", Successor: "C2"}},
		{"receipt.acquire", `{"claim":"C1"}`, claim.AcquireReceipt{Claim: "C1"}},
		{"receipt.acquire", `{"claim":"C1","decline":true,"reason":"x"}`, claim.DeclineReceipt{Claim: "C1", Reason: "x"}},
		{"receipt.adopt", `{"claim":"C1","holder":"h"}`, claim.Adopt{Claim: "C1", Holder: "h"}},
		{"progress", `{"claim":"C1","generation":2,"note":"n"}`, claim.Progress{Claim: "C1", Generation: 2, Note: "n"}},
		{"testament.close", `{"claim":"C1","testament":"T1","generation":1,"confidence":0.5,"bindings":[{"slot":"s","artifact":"a"}]}`,
			claim.CloseTestament{Claim: "C1", Testament: "T1", Generation: 1, Confidence: &conf, Bindings: []claim.Binding{{Slot: "s", Artifact: "a"}}}},
		{"testament.close", `{"claim":"C1","testament":"R1","role":"result","results":[{"artifact":"e"}]}`,
			claim.ResultTestament{Claim: "C1", Testament: "R1", Results: []claim.Ref{{Artifact: "e"}}}},
		{"testament.close", `{"claim":"C1","failed":true,"generation":1,"reason":"x"}`, claim.FailTestament{Claim: "C1", Generation: 1, Reason: "x"}},
		{"testament.post", `{"claim":"C1","testament":"T1"}`, claim.PostTestament{Claim: "C1", Testament: "T1"}},
		{"testament.receive", `{"claim":"C1","testament":"T1"}`, claim.ReceiveTestament{Claim: "C1", Testament: "T1"}},
		{"deadline.commit", `{"claim":"C1"}`, claim.CommitDeadline{Claim: "C1"}},
		{"dependency.commit", `{"claim":"C1"}`, claim.CommitDependency{Claim: "C1"}},
		{"check.begin", `{"claim":"C1","check":"k","artifact":"a"}`, claim.BeginCheck{Claim: "C1", Check: "k", Artifact: "a"}},
		{"check.report", `{"claim":"C1","check":"k","artifact":"a","result":"pass","evidence":"e"}`, claim.ReportVerdict{Claim: "C1", Check: "k", Artifact: "a", Result: claim.Pass, Evidence: "e"}},
		{"artifact.publish", `{"claim":"C1","artifact":"a","slot":"s","generation":1}`, claim.PublishArtifact{Claim: "C1", Artifact: "a", Slot: "s", Generation: 1}},
		{"artifact.receive", `{"claim":"C1","artifact":"a"}`, claim.ReceiveArtifact{Claim: "C1", Artifact: "a"}},
	} {
		act, _ := ClaimActions().Find(tc.action)
		got, err := act.Build("body", []byte(tc.body), testNow)
		if err != nil {
			t.Errorf("%s %s: %v", tc.action, tc.body, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s:\n got %#v\nwant %#v", tc.action, tc.body, got, tc.want)
		}
	}
}

// TestClaimActionTable checks the table A2A metadata and the REST routes
// read: create first, every name once, members as the documents' own.
func TestClaimActionTable(t *testing.T) {
	as := ClaimActions()
	names := as.Names()
	if names[0] != "create" {
		t.Fatalf("default action %q, want create", names[0])
	}
	for i, n := range names {
		if slices.Index(names, n) != i {
			t.Errorf("action %q twice", n)
		}
	}
	if want := Members(&ClaimTestament{}); !slices.Equal(as[8].Members, want) || as[8].Name != "testament.close" {
		t.Errorf("testament.close members %v, want %v", as[8].Members, want)
	}
	// A CLI document embeds the api one: its members are the api
	// document's and its own.
	var cli struct {
		ClaimEnd
		RequestID string `json:"request_id,omitempty"`
	}
	if got := Members(&cli); !slices.Equal(got, []string{"claim", "reason", "request_id"}) {
		t.Errorf("embedded members %v", got)
	}
}
