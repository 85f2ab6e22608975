package claim

import (
	"fmt"
	"time"

	"tally/family"
	"tally/jsonline"
)

// EnvelopeKey is the member the log adds to every line (seq, actor, hash).
// Decode skips it; it is never part of a claim record.
const EnvelopeKey = "tally"

// The record types of the claim family. Stored: do not rename.
const (
	TypeCreate           = "claim.create"
	TypePost             = "claim.post"
	TypePostFailed       = "claim.post.failed"
	TypeReceipt          = "claim.receipt"
	TypeReceiptFailed    = "claim.receipt.failed"
	TypeAdopt            = "claim.adopt"
	TypeProgress         = "claim.progress"
	TypeArtifact         = "claim.artifact"
	TypeArtifactReceive  = "claim.artifact.receive"
	TypeTestament        = "claim.testament"
	TypeTestamentFailed  = "claim.testament.failed"
	TypeTestamentPost    = "claim.testament.post"
	TypeTestamentReceive = "claim.testament.receive"
	TypeCheckBegin       = "claim.check.begin"
	TypeCheckVerdict     = "claim.check.verdict"
	TypeCancel           = "claim.cancel"
	TypeRevoke           = "claim.revoke"
	TypeSupersede        = "claim.supersede"
	TypeDeadline         = "claim.deadline"
	TypeDependency       = "claim.dependency"
	TypeDeadlock         = "claim.deadlock"
)

// Field is a member of a record this family does not know, kept verbatim
// (compacted) so that nothing is dropped when a record is re-encoded.
type Field = jsonline.Field

// Event is one decoded claim-family record. Which fields are set depends on
// Type; schema() lists each type's members in wire order. The wire name is
// beside each field.
type Event struct {
	TS   time.Time // "ts"
	Type string    // "type"

	Claim string // "claim": the claim the record is about (every type)

	// Terms (claim.create).
	Claimant     string     // "claimant"
	Respondent   string     // "respondent"
	Work         string     // "work"
	Scope        string     // "scope"
	MaxResponses int        // "max_responses"
	Deadline     time.Time  // "deadline" (create: optional; claim.deadline: the deadline enforced)
	DependsOn    []string   // "depends_on"
	Awaits       []string   // "awaits"
	Reviews      []string   // "reviews"
	DerivedFrom  []string   // "derived_from"
	Predecessor  string     // "predecessor"
	Slots        []SlotSpec // "slots"
	Holder       string     // "holder": receipt holder (receipt, adopt)
	Generation   uint64     // "generation": receipt generation the writer holds
	Artifact     string     // "artifact": artifact id
	Role         string     // "role": artifact role or testament role
	Slot         string     // "slot"
	Kind         string     // "kind"
	Schema       string     // "schema"
	Name         string     // "name": a display name (file name), not digested
	Cycle        uint64     // "cycle": work cycle, from 1
	Content      string     // "content": content digest (hex)
	Size         int64      // "size": content length in bytes
	Digest       string     // "digest": artifact digest (hex)
	Testament    string     // "testament": testament id
	Outcome      string     // "outcome"
	Summary      string     // "summary"
	Confidence   *float64   // "confidence": 0..1
	Bindings     []Binding  // "bindings": slot → artifact, frozen at close
	Diagnostics  []Ref      // "diagnostics"
	Results      []Ref      // "results": a result testament's evidence
	Check        string     // "check"
	Phase        string     // "phase"
	Handler      int        // "handler": 0 = primary validator, i = fallback i
	Validator    Validator  // "validator"
	Attempt      int        // "attempt": from 1, per handler
	Result       string     // "result"
	Evidence     string     // "evidence": the evaluator's result artifact id
	EvidenceHash string     // "evidence_digest"
	Note         string     // "note"
	Reason       string     // "reason"
	Successor    string     // "successor"
	On           string     // "on": the DependsOn target that failed
	Origin       string     // "origin": the claim whose failure started the chain
	Members      []string   // "members": a deadlocked wait-cycle, sorted
	Pool         []string   // "pool": create without a respondent: the seats that may take it (none: any seat)
	Priority     *int       // "priority": create: 0 (highest) to 4; nil is DefaultPriority
	Extra        []Field    // members this family does not know, in line order
	raw          []byte     // the decoded line, when it came from Decode
}

// Raw returns the line the event was decoded from (nil for events built by
// Decide). The log keeps the line itself; this is for callers that want it.
func (e Event) Raw() []byte { return e.raw }

// member is one wire member of a record type.
type member struct {
	name     string
	optional bool // omitted when zero
}

func req(n string) member { return member{name: n} }
func opt(n string) member { return member{name: n, optional: true} }

// schemas lists every type's members in wire order, after "ts" and "type".
var schemas = map[string][]member{
	TypeCreate: {req("claim"), req("claimant"), req("respondent"), req("work"), opt("scope"),
		req("max_responses"), opt("deadline"), opt("depends_on"), opt("awaits"), opt("reviews"),
		opt("derived_from"), opt("predecessor"), req("slots"), opt("pool"), opt("priority")},
	TypePost:          {req("claim")},
	TypePostFailed:    {req("claim"), req("reason")},
	TypeReceipt:       {req("claim"), req("holder"), req("generation")},
	TypeReceiptFailed: {req("claim"), req("reason")},
	TypeAdopt:         {req("claim"), req("holder"), req("generation"), opt("reason")},
	TypeProgress:      {req("claim"), req("generation"), req("note")},
	TypeArtifact: {req("claim"), req("artifact"), req("role"), opt("slot"), req("kind"), opt("schema"),
		opt("name"), opt("cycle"), opt("generation"), req("content"), req("size"), req("digest")},
	TypeArtifactReceive: {req("claim"), req("artifact"), req("digest")},
	TypeTestament: {req("claim"), req("testament"), req("role"), opt("generation"), opt("cycle"),
		opt("outcome"), req("summary"), opt("confidence"), opt("bindings"), opt("diagnostics"), opt("results")},
	TypeTestamentFailed:  {req("claim"), req("generation"), req("reason")},
	TypeTestamentPost:    {req("claim"), req("testament")},
	TypeTestamentReceive: {req("claim"), req("testament")},
	TypeCheckBegin: {req("claim"), req("check"), req("artifact"), req("digest"), req("phase"),
		req("handler"), req("validator"), req("attempt")},
	TypeCheckVerdict: {req("claim"), req("check"), req("artifact"), req("digest"), req("phase"),
		req("handler"), req("validator"), req("attempt"), req("result"), req("evidence"),
		req("evidence_digest"), opt("note")},
	TypeCancel:     {req("claim"), req("reason")},
	TypeRevoke:     {req("claim"), req("reason")},
	TypeSupersede:  {req("claim"), req("successor"), opt("reason")},
	TypeDeadline:   {req("claim"), req("deadline")},
	TypeDependency: {req("claim"), req("on"), req("origin")},
	TypeDeadlock:   {req("claim"), req("members")},
}

// Known reports whether typ is a record type of this family.
func Known(typ string) bool { _, ok := schemas[typ]; return ok }

func derr(field, format string, args ...any) error {
	return &family.DecodeError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
