package claim

import (
	"bytes"
	"encoding/json"
	"strconv"

	"tally/instant"
	"tally/jsonline"
)

// jsonValue encodes v without HTML escaping and without a trailing newline,
// its strings escaped by jsonline.AppendString as every family's are.
func jsonValue(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Invariant: every member type here encodes (no channels, no NaN:
		// wellFormed refuses a NaN confidence).
		panic("claim: encode: " + err.Error())
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// encoding/json and AppendString differ only in \u escapes (U+2028,
	// U+2029, invalid UTF-8): without one, the bytes are already the same.
	if !bytes.Contains(b, []byte(`\u`)) {
		return b
	}
	out, err := jsonline.AppendEscaped(make([]byte, 0, len(b)), b)
	if err != nil {
		panic("claim: encode: " + err.Error())
	}
	return out
}

// Encode returns the record's exact wire bytes (one JSON object, no newline):
// "ts" and "type" first, then the type's members in schema order (optional
// members omitted when zero), then the unknown members kept by Decode, in
// their original order. The log adds its envelope member itself.
func (e Event) Encode() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"ts":`...)
	b = append(b, jsonValue(instant.Format(e.TS))...)
	b = append(b, `,"type":`...)
	b = append(b, jsonValue(e.Type)...)
	for _, m := range schemas[e.Type] {
		v, zero := e.member(m.name)
		if m.optional && zero {
			continue
		}
		b = append(b, ',', '"')
		b = append(b, m.name...)
		b = append(b, '"', ':')
		b = append(b, v...)
	}
	b = jsonline.AppendFields(b, e.Extra)
	return append(b, '}')
}

// member returns the encoded value of a wire member and whether it is zero.
func (e *Event) member(name string) ([]byte, bool) {
	str := func(s string) ([]byte, bool) { return jsonValue(s), s == "" }
	strs := func(s []string) ([]byte, bool) {
		if s == nil {
			s = []string{}
		}
		return jsonValue(s), len(s) == 0
	}
	num := func(n int64) ([]byte, bool) { return strconv.AppendInt(nil, n, 10), n == 0 }
	unum := func(n uint64) ([]byte, bool) { return strconv.AppendUint(nil, n, 10), n == 0 }
	switch name {
	case "claim":
		return str(e.Claim)
	case "claimant":
		return str(e.Claimant)
	case "respondent":
		return str(e.Respondent)
	case "work":
		return str(e.Work)
	case "scope":
		return str(e.Scope)
	case "max_responses":
		return num(int64(e.MaxResponses))
	case "deadline":
		return jsonValue(instant.Format(e.Deadline)), e.Deadline.IsZero()
	case "depends_on":
		return strs(e.DependsOn)
	case "awaits":
		return strs(e.Awaits)
	case "reviews":
		return strs(e.Reviews)
	case "derived_from":
		return strs(e.DerivedFrom)
	case "predecessor":
		return str(e.Predecessor)
	case "slots":
		slots := e.Slots
		if slots == nil {
			slots = []SlotSpec{}
		}
		for i := range slots {
			if slots[i].Checks == nil {
				slots[i].Checks = []CheckSpec{}
			}
		}
		return jsonValue(slots), len(slots) == 0
	case "pool":
		return strs(e.Pool)
	case "priority":
		if e.Priority == nil {
			return []byte("0"), true
		}
		return strconv.AppendInt(nil, int64(*e.Priority), 10), false
	case "holder":
		return str(e.Holder)
	case "generation":
		return unum(e.Generation)
	case "artifact":
		return str(e.Artifact)
	case "role":
		return str(e.Role)
	case "slot":
		return str(e.Slot)
	case "kind":
		return str(e.Kind)
	case "schema":
		return str(e.Schema)
	case "name":
		return str(e.Name)
	case "cycle":
		return unum(e.Cycle)
	case "content":
		return str(e.Content)
	case "size":
		return num(e.Size)
	case "digest":
		return str(e.Digest)
	case "testament":
		return str(e.Testament)
	case "outcome":
		return str(e.Outcome)
	case "summary":
		return str(e.Summary)
	case "confidence":
		if e.Confidence == nil {
			return []byte("0"), true
		}
		return strconv.AppendFloat(nil, *e.Confidence, 'g', -1, 64), false
	case "bindings":
		if len(e.Bindings) == 0 {
			return []byte("[]"), true
		}
		return jsonValue(e.Bindings), false
	case "diagnostics":
		if len(e.Diagnostics) == 0 {
			return []byte("[]"), true
		}
		return jsonValue(e.Diagnostics), false
	case "results":
		if len(e.Results) == 0 {
			return []byte("[]"), true
		}
		return jsonValue(e.Results), false
	case "check":
		return str(e.Check)
	case "phase":
		return str(e.Phase)
	case "handler":
		return num(int64(e.Handler))
	case "validator":
		return jsonValue(e.Validator), false
	case "attempt":
		return num(int64(e.Attempt))
	case "result":
		return str(e.Result)
	case "evidence":
		return str(e.Evidence)
	case "evidence_digest":
		return str(e.EvidenceHash)
	case "note":
		return str(e.Note)
	case "reason":
		return str(e.Reason)
	case "successor":
		return str(e.Successor)
	case "on":
		return str(e.On)
	case "origin":
		return str(e.Origin)
	case "members":
		return strs(e.Members)
	}
	panic("claim: no encoder for member " + name)
}

// normalize gives every optional list one representation (nil when empty,
// and an empty, non-nil checks list per slot), so that a record decoded from
// its own encoding is equal to it.
func (e *Event) normalize() {
	nilIfEmpty := func(s *[]string) {
		if len(*s) == 0 {
			*s = nil
		}
	}
	nilIfEmpty(&e.DependsOn)
	nilIfEmpty(&e.Awaits)
	nilIfEmpty(&e.Reviews)
	nilIfEmpty(&e.DerivedFrom)
	nilIfEmpty(&e.Members)
	nilIfEmpty(&e.Pool)
	if len(e.Bindings) == 0 {
		e.Bindings = nil
	}
	if len(e.Diagnostics) == 0 {
		e.Diagnostics = nil
	}
	if len(e.Results) == 0 {
		e.Results = nil
	}
	if e.Type == TypeCreate && e.Slots == nil {
		e.Slots = []SlotSpec{}
	}
	for i := range e.Slots {
		if e.Slots[i].Checks == nil {
			e.Slots[i].Checks = []CheckSpec{}
		}
		for j := range e.Slots[i].Checks {
			c := &e.Slots[i].Checks[j]
			if len(c.Fallbacks) == 0 {
				c.Fallbacks = nil
			}
			if len(c.Phases) == 0 {
				c.Phases = nil
			}
		}
	}
	e.TS = e.TS.UTC()
	if !e.Deadline.IsZero() {
		e.Deadline = e.Deadline.UTC()
	}
}
