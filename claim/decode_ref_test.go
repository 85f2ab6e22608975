package claim

// A deliberately naive decoder of claim records, the reference the
// differential fuzz compares Decode with. It shares no code with Decode's
// member switch or scanner: encoding/json reads the line's members in order
// (for duplicates and the unknown members kept in Extra) and then the known
// ones into a plain struct, whose values are copied into an Event; the
// family's value rules (ranges, times) are written out again here, from
// the format, so that a slip in Decode's switch is not repeated in its
// reference. Only what follows decoding (the required members, wellFormed)
// is shared.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"tally/family"
	"tally/instant"
)

// refRecord holds every member any claim record type has, as encoding/json
// reads it.
type refRecord struct {
	TS           string     `json:"ts"`
	Claim        string     `json:"claim"`
	Claimant     string     `json:"claimant"`
	Respondent   string     `json:"respondent"`
	Work         string     `json:"work"`
	Scope        string     `json:"scope"`
	MaxResponses int64      `json:"max_responses"`
	Deadline     string     `json:"deadline"`
	DependsOn    []string   `json:"depends_on"`
	Awaits       []string   `json:"awaits"`
	Reviews      []string   `json:"reviews"`
	DerivedFrom  []string   `json:"derived_from"`
	Predecessor  string     `json:"predecessor"`
	Slots        []SlotSpec `json:"slots"`
	Pool         []string   `json:"pool"`
	Priority     *int64     `json:"priority"`
	Holder       string     `json:"holder"`
	Generation   uint64     `json:"generation"`
	Artifact     string     `json:"artifact"`
	Role         string     `json:"role"`
	Slot         string     `json:"slot"`
	Kind         string     `json:"kind"`
	Schema       string     `json:"schema"`
	Name         string     `json:"name"`
	Cycle        uint64     `json:"cycle"`
	Content      string     `json:"content"`
	Size         int64      `json:"size"`
	Digest       string     `json:"digest"`
	Testament    string     `json:"testament"`
	Outcome      string     `json:"outcome"`
	Summary      string     `json:"summary"`
	Confidence   *float64   `json:"confidence"`
	Bindings     []Binding  `json:"bindings"`
	Diagnostics  []Ref      `json:"diagnostics"`
	Results      []Ref      `json:"results"`
	Check        string     `json:"check"`
	Phase        string     `json:"phase"`
	Handler      int64      `json:"handler"`
	Validator    Validator  `json:"validator"`
	Attempt      int64      `json:"attempt"`
	Result       string     `json:"result"`
	Evidence     string     `json:"evidence"`
	EvidenceHash string     `json:"evidence_digest"`
	Note         string     `json:"note"`
	Reason       string     `json:"reason"`
	Successor    string     `json:"successor"`
	On           string     `json:"on"`
	Origin       string     `json:"origin"`
	Members      []string   `json:"members"`
}

// refTime is a wire time by the format's rule: RFC 3339 ending in Z, an
// instant tally keeps exactly.
func refTime(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || !strings.HasSuffix(s, "Z") || instant.Problem(t) != "" {
		return time.Time{}, fmt.Errorf("%s: not an RFC 3339 UTC instant tally keeps", field)
	}
	return t.UTC(), nil
}

func refRange(field string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return fmt.Errorf("%s: out of range", field)
	}
	return nil
}

// decodeJSON is the naive reference decoder.
func decodeJSON(line []byte) (Event, error) {
	var e Event
	if !utf8.Valid(line) {
		return e, errors.New("not UTF-8")
	}
	// The members in order, as encoding/json tokenises them.
	type refMember struct {
		key string
		val json.RawMessage
	}
	var members []refMember
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return e, errors.New("not an object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return e, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return e, err
		}
		for _, m := range members {
			if m.key == tok.(string) {
				return e, errors.New("a member twice")
			}
		}
		members = append(members, refMember{tok.(string), raw})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return e, errors.New("unterminated object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return e, errors.New("data after the object")
	}

	typed := false
	for _, m := range members {
		if m.key == "type" {
			if err := json.Unmarshal(m.val, &e.Type); err != nil {
				return e, err
			}
			typed = true
		}
	}
	if !typed {
		return e, errors.New("no type")
	}
	schema, ok := schemas[e.Type]
	if !ok {
		return e, fmt.Errorf("%q: %w", e.Type, family.ErrUnknownType)
	}
	known := map[string]bool{"ts": true}
	for _, m := range schema {
		known[m.name] = true
	}
	// The known members, again as one object, into the plain struct.
	obj := map[string]json.RawMessage{}
	for _, m := range members {
		switch {
		case m.key == "type" || m.key == EnvelopeKey:
		case known[m.key]:
			if string(m.val) == "null" {
				return e, errors.New(m.key + ": null")
			}
			obj[m.key] = m.val
		default:
			var c bytes.Buffer
			if err := json.Compact(&c, m.val); err != nil {
				return e, err
			}
			e.Extra = append(e.Extra, Field{Key: m.key, Value: c.Bytes()})
		}
	}
	if _, ok := obj["ts"]; !ok {
		return e, errors.New("no ts")
	}
	for _, m := range schema {
		if _, ok := obj[m.name]; !ok && !m.optional {
			return e, errors.New(m.name + ": required")
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return e, err
	}
	var r refRecord
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return e, err
	}

	if e.TS, err = refTime("ts", r.TS); err != nil {
		return e, err
	}
	if _, ok := obj["deadline"]; ok {
		if e.Deadline, err = refTime("deadline", r.Deadline); err != nil {
			return e, err
		}
	}
	for _, c := range []struct {
		field     string
		v, lo, hi int64
	}{
		{"max_responses", r.MaxResponses, 0, MaxResponsesLimit},
		{"handler", r.Handler, 0, MaxFallbacks},
		{"attempt", r.Attempt, 0, MaxAttempts},
		{"size", r.Size, 0, 1<<63 - 1},
	} {
		if err := refRange(c.field, c.v, c.lo, c.hi); err != nil {
			return e, err
		}
	}
	if r.Priority != nil {
		if err := refRange("priority", *r.Priority, 0, MaxPriority); err != nil {
			return e, err
		}
		p := int(*r.Priority)
		e.Priority = &p
	}
	if r.Confidence != nil && !(*r.Confidence >= 0 && *r.Confidence <= 1) {
		return e, errors.New("confidence: out of range")
	}
	e.Claim, e.Claimant, e.Respondent, e.Work, e.Scope = r.Claim, r.Claimant, r.Respondent, r.Work, r.Scope
	e.MaxResponses = int(r.MaxResponses)
	e.DependsOn, e.Awaits, e.Reviews, e.DerivedFrom = r.DependsOn, r.Awaits, r.Reviews, r.DerivedFrom
	e.Predecessor, e.Slots, e.Pool, e.Holder, e.Generation = r.Predecessor, r.Slots, r.Pool, r.Holder, r.Generation
	e.Artifact, e.Role, e.Slot, e.Kind, e.Schema, e.Name = r.Artifact, r.Role, r.Slot, r.Kind, r.Schema, r.Name
	e.Cycle, e.Content, e.Size, e.Digest, e.Testament = r.Cycle, r.Content, r.Size, r.Digest, r.Testament
	e.Outcome, e.Summary, e.Confidence = r.Outcome, r.Summary, r.Confidence
	e.Bindings, e.Diagnostics, e.Results = r.Bindings, r.Diagnostics, r.Results
	e.Check, e.Phase, e.Handler, e.Validator, e.Attempt = r.Check, r.Phase, int(r.Handler), r.Validator, int(r.Attempt)
	e.Result, e.Evidence, e.EvidenceHash, e.Note, e.Reason = r.Result, r.Evidence, r.EvidenceHash, r.Note, r.Reason
	e.Successor, e.On, e.Origin, e.Members = r.Successor, r.On, r.Origin, r.Members
	if err := e.wellFormed(false); err != nil {
		return e, err
	}
	e.raw = line
	return e, nil
}

// FuzzDecodeMatchesJSON decodes every input with Decode and with the naive
// encoding/json reference above: both accept or both refuse (an unknown type
// on both sides alike), and what they accept decodes to the same event.
func FuzzDecodeMatchesJSON(f *testing.F) {
	for _, line := range exampleLines(f) {
		f.Add([]byte(line))
	}
	// Each example again with a value at and past the edge of its rule.
	for _, c := range []struct {
		member string
		values []string
	}{
		{`"confidence":0.9`, []string{"1", "1.5", "-0", "0", "1e0", `"0.9"`, "1e400"}},
		{`"max_responses":4`, []string{"64", "65", "-1", "4.0", "0"}},
		{`"priority":1`, []string{"4", "5", "-0", "-1"}},
		{`"attempt":1`, []string{"64", "65", "0"}},
		{`"handler":0`, []string{"16", "17", "-1"}},
		{`"size":812`, []string{"-1", "0", "9223372036854775807", "9223372036854775808"}},
		{`"generation":1`, []string{"-0", "0", "18446744073709551615", "18446744073709551616", "1.0"}},
		{`"ts":"2026-09-01T17:00:00Z"`, []string{`"2026-09-01T19:00:00+02:00"`, `"0001-01-01T00:00:00Z"`,
			`"1000-01-01T00:00:00.000000001Z"`, `"2026-09-01T17:00:00.5Z"`, `"2026-02-29T00:00:00Z"`, "null", `"2026-09-01T17:00:00\u005a"`}},
		{`"deadline":"2026-09-04T17:00:00Z"`, []string{`"9999-12-31T23:59:59.999999Z"`, `"9999-12-31T23:59:59.9999999Z"`, `"2026-09-04T17:00:00z"`}},
	} {
		key := c.member[:strings.IndexByte(c.member, ':')+1]
		for _, line := range exampleLines(f) {
			if strings.Contains(line, c.member) {
				for _, v := range c.values {
					f.Add([]byte(strings.Replace(line, c.member, key+v, 1)))
				}
			}
		}
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
		if errors.Is(gerr, family.ErrUnknownType) != errors.Is(werr, family.ErrUnknownType) {
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
