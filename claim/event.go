package claim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
type Field struct {
	Key   string
	Value json.RawMessage
}

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
		opt("derived_from"), opt("predecessor"), req("slots")},
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

// Types lists the family's record types, sorted.
func Types() []string {
	out := make([]string, 0, len(schemas))
	for t := range schemas {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// DecodeError says why a line is not a well-formed claim record.
type DecodeError struct {
	Field string
	Msg   string
}

func (e *DecodeError) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}

func derr(field, format string, args ...any) error {
	return &DecodeError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ErrUnknownType is returned (wrapped) by Decode for a well-formed line whose
// type this family does not define. The log keeps such a line verbatim.
var ErrUnknownType = errors.New("unknown record type")

// FormatTime is the wire form of a time: RFC 3339 in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseTime reads a wire time; it must be RFC 3339 in UTC ("Z").
func parseTime(field string, raw json.RawMessage) (time.Time, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return time.Time{}, derr(field, "must be an RFC 3339 UTC time string")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !strings.HasSuffix(s, "Z") {
		return time.Time{}, derr(field, "must be an RFC 3339 UTC time (…Z), got %q", s)
	}
	return t.UTC(), nil
}

// Decode reads one log line: a JSON object, with or without tally's envelope
// member. It is strict about the members it knows (types, required members,
// enumerations, digests, no duplicates, nothing after the object) and keeps
// every member it does not know in Extra, in order. A line of another type
// returns the type and an error wrapping ErrUnknownType.
func Decode(line []byte) (Event, error) {
	var e Event
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return e, derr("", "a record must be one JSON object")
	}
	members := make([]Field, 0, 16)
	seen := make(map[string]bool, 16)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return e, derr("", "invalid JSON: %v", err)
		}
		key, ok := tok.(string)
		if !ok {
			return e, derr("", "invalid JSON: expected a member name")
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return e, derr(key, "invalid JSON: %v", err)
		}
		if seen[key] {
			return e, derr(key, "appears twice")
		}
		seen[key] = true
		members = append(members, Field{Key: key, Value: raw})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return e, derr("", "invalid JSON: unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return e, derr("", "data after the object")
	}
	if !utf8.Valid(line) {
		return e, derr("", "a record must be valid UTF-8")
	}

	var typ json.RawMessage
	for _, m := range members {
		if m.Key == "type" {
			typ = m.Value
		}
	}
	if typ == nil {
		return e, derr("type", "is required")
	}
	if err := json.Unmarshal(typ, &e.Type); err != nil {
		return e, derr("type", "must be a string")
	}
	schema, known := schemas[e.Type]
	if !known {
		return e, fmt.Errorf("%q: %w", e.Type, ErrUnknownType)
	}
	inSchema := make(map[string]bool, len(schema))
	for _, m := range schema {
		inSchema[m.name] = true
	}
	present := make(map[string]bool, len(members))
	for _, m := range members {
		switch {
		case m.Key == "type" || m.Key == EnvelopeKey:
		case m.Key == "ts":
			if e.TS, err = parseTime("ts", m.Value); err != nil {
				return e, err
			}
			present["ts"] = true
		case inSchema[m.Key]:
			if bytes.Equal(m.Value, []byte("null")) {
				return e, derr(m.Key, "must not be null")
			}
			if err := e.setMember(m.Key, m.Value); err != nil {
				return e, err
			}
			present[m.Key] = true
		default:
			var buf bytes.Buffer
			if err := json.Compact(&buf, m.Value); err != nil {
				return e, derr(m.Key, "invalid JSON: %v", err)
			}
			e.Extra = append(e.Extra, Field{Key: m.Key, Value: buf.Bytes()})
		}
	}
	if !present["ts"] {
		return e, derr("ts", "is required")
	}
	for _, m := range schema {
		if !m.optional && !present[m.name] {
			return e, derr(m.name, "is required on %s", e.Type)
		}
	}
	if err := e.wellFormed(); err != nil {
		return e, err
	}
	e.raw = line
	return e, nil
}

// strict unmarshals a nested value refusing unknown members.
func strict(raw json.RawMessage, v any) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the value")
	}
	return nil
}

func (e *Event) setMember(key string, raw json.RawMessage) error {
	str := func(dst *string) error {
		if err := json.Unmarshal(raw, dst); err != nil {
			return derr(key, "must be a string")
		}
		return nil
	}
	strs := func(dst *[]string) error {
		if err := json.Unmarshal(raw, dst); err != nil {
			return derr(key, "must be an array of strings")
		}
		return nil
	}
	uint := func(dst *uint64) error {
		v, err := strconv.ParseUint(string(raw), 10, 64)
		if err != nil {
			return derr(key, "must be a non-negative integer")
		}
		*dst = v
		return nil
	}
	sint := func(dst *int, max int64) error {
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || v < 0 || v > max {
			return derr(key, "must be an integer from 0 to %d", max)
		}
		*dst = int(v)
		return nil
	}
	nested := func(dst any) error {
		if err := strict(raw, dst); err != nil {
			return derr(key, "malformed: %v", err)
		}
		return nil
	}
	switch key {
	case "claim":
		return str(&e.Claim)
	case "claimant":
		return str(&e.Claimant)
	case "respondent":
		return str(&e.Respondent)
	case "work":
		return str(&e.Work)
	case "scope":
		return str(&e.Scope)
	case "max_responses":
		return sint(&e.MaxResponses, MaxResponsesLimit)
	case "deadline":
		t, err := parseTime(key, raw)
		e.Deadline = t
		return err
	case "depends_on":
		return strs(&e.DependsOn)
	case "awaits":
		return strs(&e.Awaits)
	case "reviews":
		return strs(&e.Reviews)
	case "derived_from":
		return strs(&e.DerivedFrom)
	case "predecessor":
		return str(&e.Predecessor)
	case "slots":
		return nested(&e.Slots)
	case "holder":
		return str(&e.Holder)
	case "generation":
		return uint(&e.Generation)
	case "artifact":
		return str(&e.Artifact)
	case "role":
		return str(&e.Role)
	case "slot":
		return str(&e.Slot)
	case "kind":
		return str(&e.Kind)
	case "schema":
		return str(&e.Schema)
	case "name":
		return str(&e.Name)
	case "cycle":
		return uint(&e.Cycle)
	case "content":
		return str(&e.Content)
	case "size":
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || v < 0 {
			return derr(key, "must be a non-negative integer")
		}
		e.Size = v
		return nil
	case "digest":
		return str(&e.Digest)
	case "testament":
		return str(&e.Testament)
	case "outcome":
		return str(&e.Outcome)
	case "summary":
		return str(&e.Summary)
	case "confidence":
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
			return derr(key, "must be a number from 0 to 1")
		}
		e.Confidence = &v
		return nil
	case "bindings":
		return nested(&e.Bindings)
	case "diagnostics":
		return nested(&e.Diagnostics)
	case "results":
		return nested(&e.Results)
	case "check":
		return str(&e.Check)
	case "phase":
		return str(&e.Phase)
	case "handler":
		return sint(&e.Handler, MaxFallbacks)
	case "validator":
		return nested(&e.Validator)
	case "attempt":
		return sint(&e.Attempt, MaxAttempts)
	case "result":
		return str(&e.Result)
	case "evidence":
		return str(&e.Evidence)
	case "evidence_digest":
		return str(&e.EvidenceHash)
	case "note":
		return str(&e.Note)
	case "reason":
		return str(&e.Reason)
	case "successor":
		return str(&e.Successor)
	case "on":
		return str(&e.On)
	case "origin":
		return str(&e.Origin)
	case "members":
		return strs(&e.Members)
	}
	return derr(key, "no decoder (internal)")
}
