package mcp

import (
	"slices"

	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/verb"
)

// arg is one argument of a tool as a model reads it: what it is and, for a
// closed set, its values. The tables below are the one place these are
// said; a tool's input schema takes its members' types from the api
// documents and their words and values from here. A name with dots is a
// member inside one ("slots.checks.mode": the mode of a slot's check; an
// array is passed through to its items).
type arg struct {
	name string
	desc string
	enum []string
	// required are the actions that require it. A tool whose table names
	// none falls back on its verbs' documents (their tags).
	required []string
}

// The closed sets, taken from the family cores' constants so that they
// cannot drift from what the cores accept (the enum test checks each
// against its core's declarations). Each call makes a fresh slice:
// nothing here is shared mutable state.

func promiseResolutions() []string {
	return []string{promise.AsSatisfied, promise.AsCancelled, promise.AsReleased}
}

func promiseAssessments() []string { return []string{promise.StateViolated} }

func promiseSelections() []string {
	return []string{promise.FilterOpen, promise.FilterOverdue, promise.FilterAll}
}

func claimModes() []string  { return strs(claim.Required, claim.Observe) }
func claimPhases() []string { return strs(claim.Programmatic, claim.Quality) }

func claimOutcomes() []string {
	return strs(claim.Complete, claim.Partial, claim.Refused, claim.Impossible, claim.Interrupted, claim.Failed)
}

func claimResults() []string { return strs(claim.Pass, claim.Fail, claim.Incomplete, claim.Error) }
func claimRoles() []string   { return strs(claim.RoleOutput, claim.RoleDiagnostic, claim.RoleResult) }

// testamentRoles are a testament's; result is also an artifact's role.
func testamentRoles() []string { return []string{claim.TestamentResponse, claim.TestamentResult} }

func claimStatuses() []string {
	return strs(claim.Generated, claim.Posted, claim.Received, claim.Progressed, claim.TestamentGenerated,
		claim.TestamentAcknowledged, claim.Validating, claim.Satisfied, claim.PostFailed, claim.ReceiptFailed,
		claim.TestamentGenerationFailed, claim.ValidationIncomplete, claim.ValidationFailed, claim.ValidationErrored,
		claim.Cancelled, claim.Revoked, claim.Superseded, claim.Expired, claim.DependencyFailed, claim.Deadlocked)
}

func expectBases() []string {
	return strs(expect.BasisObserved, expect.BasisContract, expect.BasisDeclared)
}

func expectLives() []string {
	return lifeNames(expect.Open, expect.Satisfied, expect.Withdrawn, expect.Superseded)
}

// exportFormats are service.Export's (TestLedgerVerifyExport runs each).
func exportFormats() []string { return []string{"jsonl", "json", "pinki"} }

// strs is a set of string constants as the schema's enum.
func strs[T ~string](vs ...T) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

func lifeNames(ls ...expect.Life) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.String()
	}
	return out
}

// deadlineForms is how every deadline-like member reads (instant.Deadline).
const deadlineForms = "RFC 3339, or from now (30m, 2h)"

// contextArgs describe the call's context a tool of effect e takes.
func contextArgs(e verb.Effect) []arg {
	if e == verb.Read {
		return []arg{{argSession, "[TENANT/]SESSION", nil, nil}, {argNow, "RFC 3339 (default: now)", nil, nil}}
	}
	return []arg{{argSession, "[TENANT/]SESSION", nil, nil}, {argRequestID, "idempotency key", nil, nil}}
}

// The tables, a family at a time. A nested member is described where its
// parent does not say it; a closed set always has its values.
func promiseArgs() []arg {
	return []arg{
		{"id", "promise id (declare: minted if absent)", nil, []string{"amend", "assess", "resolve"}},
		{"promise", "in words", nil, []string{"declare"}},
		{"by", "debtor: you (default)", nil, nil},
		{"to", "creditor", nil, []string{"declare"}},
		{"on", "promise it waits on", nil, nil},
		{"until", "deadline: " + deadlineForms, nil, []string{"declare", "amend"}},
		{"task", "A2A task id", nil, nil},
		{"reason", "why (cancelled: required)", nil, nil},
		{"resolution", "debtor: satisfied (evidence) or cancelled (reason); creditor: released", promiseResolutions(), []string{"resolve"}},
		{"evidence", "references to the work (satisfied)", nil, nil},
		{"observer", "who judges (default: you)", nil, nil},
		{"note", "what you observed", nil, nil},
		{"meta", "your own JSON object, kept as given", nil, nil},
	}
}

func claimArgs() []arg {
	return []arg{
		{"claim", "claim id", nil, []string{"create", "post", "receipt.acquire", "receipt.adopt", "progress", "artifact.publish", "artifact.receive", "testament.close", "testament.post", "testament.receive", "check.begin", "check.report", "cancel", "revoke", "supersede", "show", "artifact"}},
		{"claimant", "you (default)", nil, nil},
		{"respondent", "who owes the work (none: pool)", nil, nil},
		{"pool", "seats that may take it (default any)", nil, nil},
		{"priority", "0 (highest) to 4, default 2", nil, nil},
		{"work", "the work", nil, []string{"create"}},
		{"scope", "what the work may touch", nil, nil},
		{"max_responses", "work cycles (default 4)", nil, nil},
		{"deadline", deadlineForms, nil, nil},
		{"depends_on", "claims to be Satisfied first", nil, nil},
		{"awaits", "claims to end first", nil, nil},
		{"reviews", "claims it reviews", nil, nil},
		{"derived_from", "claims it derives from", nil, nil},
		{"predecessor", "ended claim this follows (slots inherited)", nil, nil},
		{"slots", "named outputs and their checks", nil, nil},
		{"slots.mode", "", claimModes(), nil},
		{"slots.checks.mode", "", claimModes(), nil},
		{"slots.checks.phases", "", claimPhases(), nil},
		{"no_checks", "no slots, none inherited", nil, nil},
		{"failed", "post or testament.close failed", nil, nil},
		{"reason", "why", nil, nil},
		{"decline", "refuse the work", nil, nil},
		{"holder", "new holder", nil, []string{"receipt.adopt"}},
		{"generation", "receipt generation", nil, []string{"progress"}},
		{"note", "what was done, or about the verdict", nil, []string{"progress"}},
		{"successor", "the claim replacing it", nil, []string{"supersede"}},
		{"testament", "testament id", nil, []string{"testament.post", "testament.receive"}},
		{"role", "a testament's (default response) or an artifact's", slices.Concat(testamentRoles()[:1], claimRoles()), nil},
		{"outcome", "how the cycle ended", claimOutcomes(), nil},
		{"summary", "what was done", nil, nil},
		{"confidence", "0 to 1", nil, nil},
		{"bindings", "each slot's artifact", nil, nil},
		{"diagnostics", "artifacts explaining a failure", nil, nil},
		{"results", "result artifacts audited", nil, nil},
		{"artifact", "artifact id", nil, []string{"artifact.publish", "artifact.receive", "check.begin", "artifact"}},
		{"digest", "artifact digest (default: recorded)", nil, nil},
		{"slot", "slot it fills", nil, nil},
		{"kind", "e.g. patch (default file)", nil, nil},
		{"schema", "media type, e.g. text/x-diff", nil, nil},
		{"name", "file name", nil, nil},
		{"content_base64", "the bytes, base64", nil, nil},
		{"content_path", "a file the server reads", nil, nil},
		{"check", "check id", nil, []string{"check.begin", "check.report"}},
		{"result", "the verdict", claimResults(), []string{"check.report"}},
		{"evidence", "artifact id for the evidence", nil, nil},
		{"evidence_digest", "digest of published evidence", nil, nil},
		{"evidence_base64", "evidence bytes, base64", nil, nil},
		{"evidence_path", "a file the server reads", nil, nil},
	}
}

func claimReadArgs() []arg {
	return []arg{
		{"state", "only in these states", claimStatuses(), nil},
		{"open", "not ended", nil, nil},
		{"overdue", "open, past deadline", nil, nil},
		{"claimant", "only this claimant's", nil, nil},
		{"respondent", "only this respondent's", nil, nil},
		{"participant", "any party", nil, nil},
		{"offset", "first byte (default 0)", nil, nil},
		{"limit", "most bytes (default 65536)", nil, nil},
	}
}

func expectArgs() []arg {
	return []arg{
		{"expectationId", "expectation id (raise: minted if absent)", nil, []string{"withdraw"}},
		{"kind", "e.g. delivery", nil, []string{"raise"}},
		{"subject", "what it is about", nil, []string{"raise", "fact"}},
		{"expects", "in words", nil, nil},
		{"satisfiedBy", "the fact key that satisfies it", nil, []string{"raise"}},
		{"dueAt", deadlineForms, nil, []string{"raise"}},
		{"grace", "past dueAt before it lapses (1h)", nil, nil},
		{"anchor", "due an offset (2h, PT2H) after another", nil, nil},
		{"after", "expectations whose facts come first", nil, nil},
		{"horizon", "stop watching at (as dueAt)", nil, nil},
		{"basis", "why this due time: measured, agreed or stated", expectBases(), []string{"raise"}},
		{"supersedes", "the open expectation this extends", nil, []string{"supersede"}},
		{"origin", "the A2A task it came from", nil, nil},
		{"by", "raiser: you (default)", nil, nil},
		{"replyTo", "where lapses go over A2A: an agent URL or an object", nil, nil},
		{"factKey", "fact: its key", nil, []string{"fact"}},
		{"at", "fact: when seen (default now)", nil, nil},
		{"reason", "why", nil, nil},
	}
}

func expectReadArgs() []arg {
	return []arg{
		{"expectationId", "expectation id", nil, []string{"show"}},
		{"state", "only in this state", expectLives(), nil},
		{"kind", "only of this kind", nil, nil},
		{"subject", "{type, id}", nil, nil},
		{"taskId", "origin A2A task", nil, nil},
		{"contextId", "origin A2A context", nil, nil},
		{"since", "RFC 3339, or a duration back (1h)", nil, nil},
	}
}

func ledgerArgs() []arg {
	return []arg{
		{"format", "jsonl (the log, default), json (promise states), pinki", exportFormats(), nil},
	}
}
