package mcp

import (
	"slices"

	"tally/claim"
	"tally/expect"
	"tally/promise"
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
}

// The closed sets, taken from the family cores' constants so that they
// cannot drift from what the cores accept (TestEnumsAreTheCores' checks
// each against its core's declarations).
var (
	promiseResolutions = []string{promise.AsSatisfied, promise.AsCancelled, promise.AsReleased}
	promiseAssessments = []string{promise.StateViolated}
	promiseSelections  = []string{promise.FilterOpen, promise.FilterOverdue, promise.FilterAll}

	claimModes      = strs(claim.Required, claim.Observe)
	claimPhases     = strs(claim.Programmatic, claim.Quality)
	claimOutcomes   = strs(claim.Complete, claim.Partial, claim.Refused, claim.Impossible, claim.Interrupted, claim.Failed)
	claimResults    = strs(claim.Pass, claim.Fail, claim.Incomplete, claim.Error)
	claimRoles      = strs(claim.RoleOutput, claim.RoleDiagnostic, claim.RoleResult)
	testamentRoles  = []string{claim.TestamentResponse, claim.TestamentResult} // result is also an artifact's role
	claimStatuses   = strs(claim.Generated, claim.Posted, claim.Received, claim.Progressed, claim.TestamentGenerated, claim.TestamentAcknowledged, claim.Validating, claim.Satisfied, claim.PostFailed, claim.ReceiptFailed, claim.TestamentGenerationFailed, claim.ValidationIncomplete, claim.ValidationFailed, claim.ValidationErrored, claim.Cancelled, claim.Revoked, claim.Superseded, claim.Expired, claim.DependencyFailed, claim.Deadlocked)
	expectBases     = strs(expect.BasisObserved, expect.BasisContract, expect.BasisDeclared)
	expectLives     = lifeNames(expect.Open, expect.Satisfied, expect.Withdrawn, expect.Superseded)
	exportFormats   = []string{"jsonl", "json", "pinki"} // service.Export's; TestEnumsAreTheCores tries each
	artifactEncodes = []string{encodingUTF8, encodingBase64}
)

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
const deadlineForms = "RFC 3339, or a duration from now (30m, 2h, 3d)"

// The call's context, which every tool of a kind takes.
var (
	argSessionDesc   = arg{argSession, "TENANT/SESSION or SESSION", nil}
	argRequestIDDesc = arg{argRequestID, "idempotency key", nil}
	argNowDesc       = arg{argNow, "read as of this RFC 3339 time", nil}
	argMeta          = arg{"meta", "your own JSON object, kept as given", nil}
)

// The tables, a family at a time. A nested member is described where its
// parent does not say it; a closed set always has its values.
var promiseArgs = []arg{
	{"id", "promise id (declare: minted if absent)", nil},
	{"promise", "in words", nil},
	{"by", "debtor: you (default)", nil},
	{"to", "creditor", nil},
	{"on", "promise it waits on", nil},
	{"until", "deadline: " + deadlineForms, nil},
	{"task", "A2A task id", nil},
	{"reason", "why (cancelled: required)", nil},
	{"resolution", "debtor: satisfied (evidence) or cancelled (reason); creditor: released", promiseResolutions},
	{"evidence", "references to the work (satisfied)", nil},
	{"observer", "who judges (default: you)", nil},
	{"note", "what you observed", nil},
	argMeta,
}

var claimArgs = []arg{
	{"claim", "claim id", nil},
	{"claimant", "you (default)", nil},
	{"respondent", "who owes the work", nil},
	{"work", "the work", nil},
	{"scope", "what the work may touch", nil},
	{"max_responses", "work cycles (default 4)", nil},
	{"deadline", deadlineForms, nil},
	{"depends_on", "claims to be Satisfied first", nil},
	{"awaits", "claims to end first", nil},
	{"reviews", "claims it reviews", nil},
	{"derived_from", "claims it derives from", nil},
	{"predecessor", "ended claim this follows (slots inherited)", nil},
	{"slots", "named outputs and their checks", nil},
	{"slots.mode", "", claimModes},
	{"slots.checks.mode", "", claimModes},
	{"slots.checks.phases", "", claimPhases},
	{"no_checks", "no slots, none inherited", nil},
	{"failed", "post or testament.close failed", nil},
	{"reason", "why", nil},
	{"decline", "refuse the work", nil},
	{"holder", "new holder", nil},
	{"generation", "receipt generation", nil},
	{"note", "a note", nil},
	{"successor", "the claim replacing it", nil},
	{"testament", "testament id", nil},
	{"role", "testament: response (default) or result; artifact: output, diagnostic or result", slices.Concat(testamentRoles[:1], claimRoles)},
	{"outcome", "how the cycle ended", claimOutcomes},
	{"summary", "what was done", nil},
	{"confidence", "0 to 1", nil},
	{"bindings", "each slot's artifact", nil},
	{"diagnostics", "artifacts explaining a failure", nil},
	{"results", "result artifacts audited", nil},
	{"artifact", "artifact id", nil},
	{"digest", "artifact digest (default: recorded)", nil},
	{"slot", "slot it fills", nil},
	{"kind", "e.g. patch (default file)", nil},
	{"schema", "media type, e.g. text/x-diff", nil},
	{"name", "file name", nil},
	{"content_base64", "the bytes, base64", nil},
	{"content_path", "a file this server reads the bytes from", nil},
	{"check", "check id", nil},
	{"result", "the verdict", claimResults},
	{"evidence", "artifact id for the evidence", nil},
	{"evidence_digest", "digest of published evidence", nil},
	{"evidence_base64", "evidence bytes, base64", nil},
	{"evidence_path", "a file this server reads the evidence from", nil},
}

var claimReadArgs = []arg{
	{"state", "any of these", claimStatuses},
	{"open", "not ended", nil},
	{"overdue", "open, past deadline", nil},
	{"claimant", "claimant", nil},
	{"respondent", "respondent", nil},
	{"participant", "any party", nil},
	{"offset", "first byte (default 0)", nil},
	{"limit", "most bytes (default 65536)", nil},
}

var expectArgs = []arg{
	{"expectationId", "expectation id (raise: minted if absent)", nil},
	{"kind", "e.g. delivery", nil},
	{"subject", "what it is about", nil},
	{"expects", "in words", nil},
	{"satisfiedBy", "the fact key that satisfies it", nil},
	{"dueAt", deadlineForms, nil},
	{"grace", "time past dueAt before it lapses (1h, PT1H)", nil},
	{"anchor", "due an offset (2h, PT2H) after another", nil},
	{"after", "expectations whose facts come first", nil},
	{"horizon", "stop watching at: " + deadlineForms, nil},
	{"basis", "why this due time: measured, agreed or stated", expectBases},
	{"supersedes", "the open expectation this extends", nil},
	{"origin", "the A2A task it came from", nil},
	{"by", "raiser: you (default)", nil},
	{"replyTo", "where lapses go over A2A: an agent URL or an object", nil},
	{"factKey", "fact: its key", nil},
	{"at", "fact: when observed, RFC 3339 (default now)", nil},
	{"reason", "why", nil},
}

var expectReadArgs = []arg{
	{"expectationId", "expectation id", nil},
	{"state", "state", expectLives},
	{"kind", "kind", nil},
	{"subject", "{type, id}", nil},
	{"taskId", "origin A2A task", nil},
	{"contextId", "origin A2A context", nil},
	{"since", "RFC 3339, or a duration back (1h)", nil},
}

var ledgerArgs = []arg{
	{"format", "jsonl (the log, default), json (promise states), pinki", exportFormats},
}
