package claim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"tally/family"
	"tally/instant"
	"tally/jsonline"
)

// typeDecoder is one record type's schema as Decode reads it.
type typeDecoder struct {
	name    string   // the canonical type string (no allocation per line)
	members []member // wire order, after "ts" and "type"
}

var decoders = func() map[string]*typeDecoder {
	out := make(map[string]*typeDecoder, len(schemas))
	for name, ms := range schemas {
		if len(ms) > 32 {
			panic("claim: a schema of more than 32 members")
		}
		out[name] = &typeDecoder{name: name, members: ms}
	}
	return out
}()

func (d *typeDecoder) index(key []byte) int {
	for i := range d.members {
		if d.members[i].name == string(key) {
			return i
		}
	}
	return -1
}

// rawMember is one top-level member of a line: its unescaped name and its
// validated value span (both alias the line, unless the name had escapes).
type rawMember struct{ key, val []byte }

// Decode reads one log line: a JSON object, with or without tally's envelope
// member. It is strict about the members it knows (types, required members,
// enumerations, digests, no duplicates, nothing after the object) and keeps
// every member it does not know in Extra, in order. A line of another type
// returns the type and an error wrapping family.ErrUnknownType.
//
// It reads the line in one validating pass of the reflection-free wire
// scanner and converts only the members of the record's type. Nested terms
// in their canonical form (slots, validators, bindings, references) are read
// the same way; anything else there (a member name in another case, a
// repeated member, null) goes through encoding/json with unknown members
// refused, so the set of lines Decode accepts, and what it makes of them,
// are exactly those of a naive encoding/json decoder (decode_ref_test.go
// writes one and fuzzes the two against each other).
func Decode(line []byte) (Event, error) {
	var e Event
	var buf [24]rawMember
	members := buf[:0]
	err := jsonline.Object(line, func(k, v []byte) error {
		if bytes.IndexByte(k, '\\') >= 0 {
			s, err := jsonline.String(append(append([]byte{'"'}, k...), '"'))
			if err != nil {
				return derr("", "invalid JSON: %v", err)
			}
			k = []byte(s)
		}
		for i := range members {
			if bytes.Equal(members[i].key, k) {
				return derr(string(k), "appears twice")
			}
		}
		members = append(members, rawMember{k, v})
		return nil
	})
	if err != nil {
		var de *family.DecodeError
		if errors.As(err, &de) {
			return e, err
		}
		var se *jsonline.SyntaxError
		if errors.As(err, &se) && se.Msg == "expected an object" && se.Offset == 0 {
			return e, derr("", "a record must be one JSON object")
		}
		return e, derr("", "invalid JSON: %v", err)
	}

	var typ []byte
	for i := range members {
		if string(members[i].key) == "type" {
			typ = members[i].val
		}
	}
	if typ == nil {
		return e, derr("type", "is required")
	}
	var d *typeDecoder
	switch {
	case jsonline.IsNull(typ): // encoding/json leaves the string empty: an unknown type
	case len(typ) >= 2 && typ[0] == '"' && bytes.IndexByte(typ, '\\') < 0:
		d = decoders[string(typ[1:len(typ)-1])]
		if d == nil {
			e.Type = string(typ[1 : len(typ)-1])
		}
	default:
		s, err := jsonline.String(typ)
		if err != nil {
			return e, derr("type", "must be a string")
		}
		d, e.Type = decoders[s], s
	}
	if d == nil {
		return e, fmt.Errorf("%q: %w", e.Type, family.ErrUnknownType)
	}
	e.Type = d.name

	var present uint32
	hasTS := false
	for i := range members {
		m := &members[i]
		switch string(m.key) {
		case "type", EnvelopeKey:
			continue
		case "ts":
			if e.TS, err = timeMember("ts", m.val); err != nil {
				return e, err
			}
			hasTS = true
			continue
		}
		j := d.index(m.key)
		if j < 0 {
			e.Extra = append(e.Extra, Field{Key: string(m.key), Value: compact(m.val)})
			continue
		}
		name := d.members[j].name
		if jsonline.IsNull(m.val) {
			return e, derr(name, "must not be null")
		}
		if err := e.setMember(name, m.val); err != nil {
			return e, err
		}
		present |= 1 << j
	}
	if !hasTS {
		return e, derr("ts", "is required")
	}
	for j, m := range d.members {
		if !m.optional && present&(1<<j) == 0 {
			return e, derr(m.name, "is required on %s", e.Type)
		}
	}
	if err := e.wellFormed(false); err != nil {
		return e, err
	}
	e.raw = line
	return e, nil
}

// compact copies a validated value without insignificant whitespace.
func compact(v []byte) json.RawMessage {
	out := make([]byte, 0, len(v))
	in := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case in:
			out = append(out, c)
			if c == '\\' {
				i++
				out = append(out, v[i])
			} else if c == '"' {
				in = false
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
		default:
			if c == '"' {
				in = true
			}
			out = append(out, c)
		}
	}
	return out
}

// timeMember reads a wire time; it must be RFC 3339 in UTC ("Z").
func timeMember(field string, raw []byte) (time.Time, error) {
	var s string
	if !jsonline.IsNull(raw) { // encoding/json read null as ""; it fails below
		var err error
		if s, err = jsonline.String(raw); err != nil {
			return time.Time{}, derr(field, "must be an RFC 3339 UTC time string")
		}
	}
	t, rule := instant.ReadUTC(s)
	if rule == instant.UTCRule {
		return time.Time{}, derr(field, "must be an RFC 3339 UTC time (…Z), got %q", s)
	}
	if rule != "" {
		return time.Time{}, derr(field, "%s, got %q", rule, s)
	}
	return t, nil
}

func (e *Event) setMember(key string, raw []byte) error {
	str := func(dst *string) error {
		s, err := jsonline.String(raw)
		if err != nil {
			return derr(key, "must be a string")
		}
		*dst = s
		return nil
	}
	strs := func(dst *[]string) error {
		ss, err := jsonline.Strings(raw)
		if err != nil {
			return derr(key, "must be an array of strings")
		}
		*dst = ss
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
		t, err := timeMember(key, raw)
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
		return nested(key, raw, &e.Slots, readSlots)
	case "pool":
		return strs(&e.Pool)
	case "priority":
		var p int
		if err := sint(&p, MaxPriority); err != nil {
			return derr(key, "must be an integer from 0 (highest) to %d", MaxPriority)
		}
		e.Priority = &p
		return nil
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
		return nested(key, raw, &e.Bindings, readBindings)
	case "diagnostics":
		return nested(key, raw, &e.Diagnostics, readRefs)
	case "results":
		return nested(key, raw, &e.Results, readRefs)
	case "check":
		return str(&e.Check)
	case "phase":
		return str(&e.Phase)
	case "handler":
		return sint(&e.Handler, MaxFallbacks)
	case "validator":
		return nested(key, raw, &e.Validator, readValidator)
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
