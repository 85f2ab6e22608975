package expect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"tally/family"
	"tally/jsonline"
)

// bad is this family's decode error: a family.DecodeError, said after
// "decode: " as expectation records always have been.
func bad(field, msg string) error {
	return fmt.Errorf("decode: %w", &family.DecodeError{Field: field, Msg: msg})
}

// member is one raw top-level member of a line.
type member struct {
	key   string
	value json.RawMessage
}

// members splits a JSON object into its members in order, refusing
// duplicates and anything after the object.
func members(line []byte, where string) ([]member, error) {
	var out []member
	err := jsonline.Object(line, func(k, v []byte) error {
		key := string(k)
		if bytes.IndexByte(k, '\\') >= 0 {
			q := make([]byte, 0, len(k)+2)
			q = append(append(append(q, '"'), k...), '"')
			if err := json.Unmarshal(q, &key); err != nil {
				return bad(where, "not JSON: "+err.Error())
			}
		}
		if len(out) == MembersMax {
			return bad(where, fmt.Sprintf("has more than %d members", MembersMax))
		}
		for _, m := range out {
			if m.key == key {
				return bad(joinField(where, key), "appears twice")
			}
		}
		out = append(out, member{key: key, value: json.RawMessage(bytes.Clone(v))})
		return nil
	})
	if err != nil {
		var se *jsonline.SyntaxError
		if !errors.As(err, &se) {
			return nil, err
		}
		if jsonline.Valid(line) {
			return nil, bad(where, "must be an object")
		}
		return nil, bad(where, "not JSON: "+err.Error())
	}
	return out, nil
}

func joinField(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

func isNull(v json.RawMessage) bool { return string(v) == "null" }

// fields decodes a nested object whose members are all known: unknown
// members are refused, since nothing would keep them.
func fields(v json.RawMessage, where string, set map[string]func(json.RawMessage) error) error {
	ms, err := members(v, where)
	if err != nil {
		return err
	}
	for _, m := range ms {
		fn, ok := set[m.key]
		if !ok {
			return bad(joinField(where, m.key), "unknown member")
		}
		if err := fn(m.value); err != nil {
			return err
		}
	}
	return nil
}

func str(field string, dst *string) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		if isNull(v) {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return bad(field, "must be a string")
		}
		return nil
	}
}

func timeField(field string, dst *time.Time) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		var s string
		if err := str(field, &s)(v); err != nil || s == "" {
			return err
		}
		t, err := ParseTime(s)
		if err != nil {
			return bad(field, err.Error())
		}
		*dst = t
		return nil
	}
}

func durationField(field string, dst *time.Duration, set *bool) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		var s string
		if err := str(field, &s)(v); err != nil || s == "" {
			return err
		}
		d, err := ParseDuration(s)
		if err != nil {
			return bad(field, err.Error())
		}
		*dst = d
		if set != nil {
			*set = true
		}
		return nil
	}
}

func subjectField(field string, dst *Subject) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		if isNull(v) {
			return nil
		}
		return fields(v, field, map[string]func(json.RawMessage) error{
			"type": str(field+".type", &dst.Type),
			"id":   str(field+".id", &dst.ID),
		})
	}
}

// validID reports whether s is usable as an identifier: 1..IDMax bytes of
// valid UTF-8 with no whitespace or control characters.
func validID(s string) bool {
	if s == "" || len(s) > IDMax || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || (r >= 0x80 && r <= 0x9f) || r == 0x85 || r == 0xa0 ||
			r == 0x2028 || r == 0x2029 || (r >= 0x2000 && r <= 0x200a) || r == 0x3000 || r == 0xfeff {
			return false
		}
	}
	return true
}

func idField(field string, dst *string) func(json.RawMessage) error {
	return func(v json.RawMessage) error {
		if err := str(field, dst)(v); err != nil {
			return err
		}
		if *dst != "" && !validID(*dst) {
			return bad(field, fmt.Sprintf("must be 1..%d characters without whitespace", IDMax))
		}
		return nil
	}
}

// Decode reads one log line (a JSON object, with or without tally's
// envelope). Members it knows are validated and typed; members it does not
// know are kept in Extra; the envelope member is skipped. A well-formed line
// of another type returns an Event holding only TS and Type, with an error
// wrapping family.ErrUnknownType, so the caller can keep the line and report it.
func Decode(line []byte) (Event, error) {
	ms, err := members(line, "")
	if err != nil {
		return Event{}, err
	}
	var e Event
	var tsSeen, typeSeen bool
	for _, m := range ms {
		switch m.key {
		case "type":
			if err := str("type", &e.Type)(m.value); err != nil {
				return Event{}, err
			}
			typeSeen = e.Type != ""
		case "ts":
			if err := timeField("ts", &e.TS)(m.value); err != nil {
				return Event{}, err
			}
			tsSeen = !e.TS.IsZero()
		}
	}
	if !typeSeen {
		return Event{}, bad("type", "missing")
	}
	if !Known(e.Type) {
		return Event{TS: e.TS, Type: e.Type}, fmt.Errorf("%w %q", family.ErrUnknownType, e.Type)
	}
	if !tsSeen {
		return Event{}, bad("ts", "missing")
	}
	set := e.setters()
	for _, m := range ms {
		if m.key == "ts" || m.key == "type" || m.key == EnvelopeKey {
			continue
		}
		if fn, ok := set[m.key]; ok {
			if err := fn(m.value); err != nil {
				return Event{}, err
			}
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, m.value); err != nil {
			return Event{}, bad(m.key, "not JSON")
		}
		e.Extra = append(e.Extra, Field{Key: m.key, Value: c.Bytes()})
	}
	if err := e.wellFormed(); err != nil {
		return Event{}, err
	}
	if e.Fact != nil && e.Fact.At.IsZero() {
		e.Fact.At = e.TS // "at" defaults to the time recorded
	}
	return e, nil
}

// setters allocates the body for e.Type and returns the decoders of its
// members.
func (e *Event) setters() map[string]func(json.RawMessage) error {
	switch e.Type {
	case TypeRaise:
		r := &Raise{}
		e.Raise = r
		return map[string]func(json.RawMessage) error{
			"expectationId": idField("expectationId", &r.ExpectationID),
			"kind":          str("kind", &r.Kind),
			"subject":       subjectField("subject", &r.Subject),
			"expects":       str("expects", &r.Expects),
			"satisfiedBy": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				return fields(v, "satisfiedBy", map[string]func(json.RawMessage) error{
					"factKey": str("satisfiedBy.factKey", &r.FactKey),
				})
			},
			"dueAt": timeField("dueAt", &r.DueAt),
			"grace": durationField("grace", &r.Grace, nil),
			"anchor": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				a := &Anchor{}
				var offsetSet bool
				err := fields(v, "anchor", map[string]func(json.RawMessage) error{
					"expectationId": idField("anchor.expectationId", &a.ExpectationID),
					"offset":        durationField("anchor.offset", &a.Offset, &offsetSet),
				})
				if err != nil {
					return err
				}
				if a.ExpectationID == "" {
					return bad("anchor.expectationId", "missing")
				}
				if !offsetSet {
					return bad("anchor.offset", "missing")
				}
				r.Anchor = a
				return nil
			},
			"after": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				var ids []string
				if err := json.Unmarshal(v, &ids); err != nil {
					return bad("after", "must be an array of strings")
				}
				for _, id := range ids {
					if !validID(id) {
						return bad("after", fmt.Sprintf("must hold ids of 1..%d characters without whitespace", IDMax))
					}
				}
				if len(ids) > 0 {
					r.After = ids
				}
				return nil
			},
			"horizon":    timeField("horizon", &r.Horizon),
			"basis":      func(v json.RawMessage) error { return str("basis", (*string)(&r.Basis))(v) },
			"supersedes": idField("supersedes", &r.Supersedes),
			"origin": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				return fields(v, "origin", map[string]func(json.RawMessage) error{
					"taskId":    idField("origin.taskId", &r.Origin.TaskID),
					"contextId": idField("origin.contextId", &r.Origin.ContextID),
				})
			},
			"replyTo": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				rt := &ReplyTo{}
				err := fields(v, "replyTo", map[string]func(json.RawMessage) error{
					"url":       str("replyTo.url", &rt.URL),
					"extension": str("replyTo.extension", &rt.Extension),
					"push": func(v json.RawMessage) error {
						if isNull(v) {
							return nil
						}
						return fields(v, "replyTo.push", map[string]func(json.RawMessage) error{
							"url":   str("replyTo.push.url", &rt.PushURL),
							"token": str("replyTo.push.token", &rt.PushToken),
							"authentication": func(v json.RawMessage) error {
								if isNull(v) {
									return nil
								}
								return fields(v, "replyTo.push.authentication", map[string]func(json.RawMessage) error{
									"scheme":      str("replyTo.push.authentication.scheme", &rt.PushAuthScheme),
									"credentials": str("replyTo.push.authentication.credentials", &rt.PushAuthCredentials),
								})
							},
						})
					},
				})
				if err != nil {
					return err
				}
				r.ReplyTo = rt
				return nil
			},
			"by":       str("by", &r.By),
			"producer": str("producer", &r.Producer),
			"human": func(v json.RawMessage) error {
				if isNull(v) {
					return nil
				}
				if err := json.Unmarshal(v, &r.Human); err != nil {
					return bad("human", "must be a boolean")
				}
				return nil
			},
		}
	case TypeWithdraw:
		w := &Withdraw{}
		e.Withdraw = w
		return map[string]func(json.RawMessage) error{
			"expectationId": idField("expectationId", &w.ExpectationID),
			"by":            str("by", &w.By),
			"reason":        str("reason", &w.Reason),
		}
	case TypeFact:
		f := &Fact{}
		e.Fact = f
		return map[string]func(json.RawMessage) error{
			"factKey": str("factKey", &f.FactKey),
			"subject": subjectField("subject", &f.Subject),
			"at":      timeField("at", &f.At),
			"by":      str("by", &f.By),
		}
	case TypeLapse:
		l := &Lapse{}
		e.Lapse = l
		return map[string]func(json.RawMessage) error{
			"lapseId":       idField("lapseId", &l.LapseID),
			"expectationId": idField("expectationId", &l.ExpectationID),
			"lapse":         func(v json.RawMessage) error { return str("lapse", (*string)(&l.Kind))(v) },
			"dueAt":         timeField("dueAt", &l.DueAt),
			"lapsedAt":      timeField("lapsedAt", &l.LapsedAt),
			"by":            str("by", &l.By),
		}
	case TypeTaskOutcome:
		o := &TaskOutcome{}
		e.TaskOutcome = o
		return map[string]func(json.RawMessage) error{
			"taskId":  idField("taskId", &o.TaskID),
			"outcome": func(v json.RawMessage) error { return str("outcome", (*string)(&o.Outcome))(v) },
			"by":      str("by", &o.By),
		}
	}
	panic("expect: setters for unknown type " + e.Type)
}

// wellFormed checks what a record needs on its own, whatever the ledger
// holds: required members present, enums known. Decode calls it after
// reading, and Decide's events pass it before they are returned.
func (e *Event) wellFormed() error {
	if e.TS.IsZero() {
		return bad("ts", "missing")
	}
	switch e.Type {
	case TypeRaise:
		r := e.Raise
		switch {
		case r.ExpectationID == "":
			return bad("expectationId", "missing")
		case r.Kind == "":
			return bad("kind", "missing")
		case r.Subject.Type == "" || r.Subject.ID == "":
			return bad("subject", "needs a type and an id")
		case r.FactKey == "":
			return bad("satisfiedBy.factKey", "missing")
		case r.DueAt.IsZero():
			return bad("dueAt", "missing: there is no open-ended expectation")
		case r.Basis == "":
			return bad("basis", "missing")
		case !r.Basis.valid():
			return bad("basis", "must be observed, contract or declared")
		case r.By == "":
			return bad("by", "missing")
		case r.Origin.TaskID == "" && r.Origin.ContextID != "":
			return bad("origin.taskId", "missing")
		}
		if r.ReplyTo != nil {
			if field, msg := r.ReplyTo.problem(); field != "" {
				return bad(field, msg)
			}
		}
	case TypeWithdraw:
		w := e.Withdraw
		switch {
		case w.ExpectationID == "":
			return bad("expectationId", "missing")
		case w.By == "":
			return bad("by", "missing")
		}
	case TypeFact:
		f := e.Fact
		switch {
		case f.FactKey == "":
			return bad("factKey", "missing")
		case f.Subject.Type == "" || f.Subject.ID == "":
			return bad("subject", "needs a type and an id")
		}
	case TypeLapse:
		l := e.Lapse
		switch {
		case l.LapseID == "":
			return bad("lapseId", "missing")
		case l.ExpectationID == "":
			return bad("expectationId", "missing")
		case l.Kind == "":
			return bad("lapse", "missing")
		case !l.Kind.valid():
			return bad("lapse", "must be overdue, skipped or stalled")
		case l.DueAt.IsZero():
			return bad("dueAt", "missing")
		case l.LapsedAt.IsZero():
			return bad("lapsedAt", "missing")
		case l.By == "":
			return bad("by", "missing")
		}
	case TypeTaskOutcome:
		o := e.TaskOutcome
		switch {
		case o.TaskID == "":
			return bad("taskId", "missing")
		case o.Outcome == "":
			return bad("outcome", "missing")
		case !o.Outcome.valid():
			return bad("outcome", "must be completed, cancelled or failed")
		}
	default:
		return fmt.Errorf("%w %q", family.ErrUnknownType, e.Type)
	}
	return nil
}
