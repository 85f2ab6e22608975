package claim

// The decoder tally used before Decode moved to the reflection-free wire
// scanner, kept as the reference the differential fuzz test compares with.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tally/vocab"
)

// parseTime reads a wire time; it must be RFC 3339 in UTC ("Z").
func parseTimeJSON(field string, raw json.RawMessage) (time.Time, error) {
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
// returns the type and an error wrapping vocab.ErrUnknownType.
func decodeJSON(line []byte) (Event, error) {
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
		return e, fmt.Errorf("%q: %w", e.Type, vocab.ErrUnknownType)
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
			if e.TS, err = parseTimeJSON("ts", m.Value); err != nil {
				return e, err
			}
			present["ts"] = true
		case inSchema[m.Key]:
			if bytes.Equal(m.Value, []byte("null")) {
				return e, derr(m.Key, "must not be null")
			}
			if err := e.setMemberJSON(m.Key, m.Value); err != nil {
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
	if err := e.wellFormed(false); err != nil {
		return e, err
	}
	e.raw = line
	return e, nil
}

// strict unmarshals a nested value refusing unknown members.
func strictRef(raw json.RawMessage, v any) error {
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

func (e *Event) setMemberJSON(key string, raw json.RawMessage) error {
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
		if err := strictRef(raw, dst); err != nil {
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
		t, err := parseTimeJSON(key, raw)
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

// FuzzDecodeMatchesJSON decodes every input with Decode and with the
// encoding/json decoder it replaced: both accept or both refuse (an unknown
// type on both sides alike), and what they accept decodes to the same event.
func FuzzDecodeMatchesJSON(f *testing.F) {
	for _, line := range exampleLines(f) {
		f.Add([]byte(line))
	}
	for _, s := range []string{
		`{"tally":{"seq":7},"claim":"C1","future":[1, 2],"type":"claim.post","ts":"2026-09-01T17:00:00Z","zz":"x"}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.post","cl\u0061im":"C1","claim":"C2"}`,
		`{"ts":"2026-09-01T17:00:00Z","type":null,"claim":"C1"}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.check.begin","claim":"C1","check":"b","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","phase":"programmatic","handler":0,"validator":{"NAME":"command","version":"1","name":"x"},"attempt":1}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.check.begin","claim":"C1","check":"b","artifact":"A","digest":"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb","phase":"programmatic","handler":0,"validator":{"name":"command","version":"1","name":null},"attempt":1}`,
		`{"ts":"2026-09-01T17:00:00Z","type":"claim.create","claim":"C1","claimant":"m","respondent":"p","work":"w","max_responses":4,"slots":[{"name":"s","mode":"required","checks":[{"id":"c","validator":{"name":"v","version":"1"},"evaluator":"m","mode":"required","phases":["programmatic"],"attempts":1e0}]}]}`,
		` { "ts" : "2026-09-01T17:00:00Z" , "type" : "claim.post" , "claim" : "C1" , "x" : [ 1 , { "a" : " b " } ] } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		got, gerr := Decode(line)
		want, werr := decodeJSON(line)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%s\nwire: %v\njson: %v", line, gerr, werr)
		}
		if errors.Is(gerr, vocab.ErrUnknownType) != errors.Is(werr, vocab.ErrUnknownType) {
			t.Fatalf("%s\nwire: %v\njson: %v", line, gerr, werr)
		}
		if gerr != nil {
			return
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s\nwire: %+v\njson: %+v", line, got, want)
		}
	})
}
