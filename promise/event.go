// Package promise is the pure semantics of tally's promise family: the
// records pinki defined (promise, amend, resolve, assess), their exact wire
// shapes, the rules a command must obey, and the fold that turns a log of
// records into states. It does no I/O and never reads a clock: time is an
// argument, so the same log and the same now give the same answer anywhere.
package promise

import (
	"errors"
	"fmt"
	"time"

	"tally/family"
	"tally/instant"
	"tally/jsonline"
)

// Record types of the promise family. Stored in every log: do not rename.
const (
	TypePromise = "promise"
	TypeAmend   = "amend"
	TypeResolve = "resolve"
	TypeAssess  = "assess"
)

// Resolution kinds (the "as" field). Stored: do not rename.
const (
	AsSatisfied = "satisfied"
	AsCancelled = "cancelled"
	AsReleased  = "released"
)

// StateViolated is the only assessment pinki defines. Stored: do not rename.
const StateViolated = "violated"

// EnvelopeKey is the member tally's log adds to every line; family decoders
// skip it.
const EnvelopeKey = "tally"

// Event is one decoded promise-family record. Which fields are set depends
// on Type; the wire names are given beside each field.
type Event struct {
	TS   time.Time // "ts"
	Type string    // "type"

	// ID is "id" on a declaration and "promise" on every other record: the
	// promise the record is about.
	ID       string
	Text     string   // "promise" on a declaration: what is promised
	By       string   // "by": the debtor, or the resolver on a resolve
	To       string   // "to": the creditor
	On       string   // "on": the antecedent promise id
	Until    string   // "until": RFC 3339 deadline as written
	Task     string   // "task": an A2A task id
	As       string   // "as": satisfied | cancelled | released
	Evidence []string // "evidence"
	Reason   string   // "reason"
	State    string   // "state" on an assessment
	Observer string   // "observer"
	Note     string   // "note"
	Meta     string   // "meta": raw JSON object, never read by the fold

	until    int64 // Until parsed by Decode (unix ns), so the fold need not parse it again
	untilSet bool
	// named says By, To and Observer are the fold's interned strings
	// already (decode found them there), so Apply need not look again.
	named bool
}

// Known reports whether typ belongs to this family.
func Known(typ string) bool {
	switch typ {
	case TypePromise, TypeAmend, TypeResolve, TypeAssess:
		return true
	}
	return false
}

// Decode reads one log line (a JSON object, with or without tally's
// envelope). It validates the whole line; members it does not know are left
// in the line, which the log keeps verbatim. A line of a type this package
// does not define returns the type and an error wrapping family.ErrUnknownType.
func Decode(line []byte) (Event, error) { return decode(line, nil) }

// decode is Decode taking the fold's interned participants (or nil): a by,
// to or observer is looked up there once, and added if new, rather than
// copied out of the line and interned by Apply; a type, as or state tally
// defines is not copied either, nor is a ts in the canonical shape, which
// is read in place.
func decode(line []byte, names map[string]string) (Event, error) {
	var e Event
	var seen uint32
	err := jsonline.Object(line, func(key, v []byte) error {
		f := fieldOf(key)
		if f == fNone {
			return nil
		}
		if seen&(1<<f) != 0 {
			return &family.DecodeError{Field: fieldNames[f], Msg: "appears twice"}
		}
		seen |= 1 << f
		if f == fEvidence {
			ev, err := jsonline.Strings(v)
			if err != nil {
				return &family.DecodeError{Field: "evidence", Msg: "must be an array of strings"}
			}
			e.Evidence = ev
			return nil
		}
		if f == fMeta {
			if !jsonline.IsObject(v) {
				return &family.DecodeError{Field: "meta", Msg: "must be an object"}
			}
			e.Meta = string(v)
			return nil
		}
		if raw, ok := plain(v); ok {
			switch f {
			case fTS:
				// raw holds no escapes, so it is the string itself.
				return readTS(&e, raw)
			case fType:
				if c := constant(raw, TypePromise, TypeAmend, TypeResolve, TypeAssess); c != "" {
					e.Type = c
					return nil
				}
			case fAs:
				if c := constant(raw, AsSatisfied, AsCancelled, AsReleased); c != "" {
					e.As = c
					return nil
				}
			case fState:
				if c := constant(raw, StateViolated); c != "" {
					e.State = c
					return nil
				}
			case fBy, fTo, fObserver:
				if names != nil {
					w, ok := names[string(raw)]
					if !ok {
						w = string(raw)
						names[w] = w
					}
					e.setParty(f, w)
					return nil
				}
			}
		}
		s, err := jsonline.String(v)
		if err != nil {
			return &family.DecodeError{Field: fieldNames[f], Msg: "must be a string"}
		}
		switch f {
		case fTS:
			return readTS(&e, s)
		case fType:
			e.Type = s
		case fID:
			e.ID = s
		case fPromise:
			e.Text = s // reassigned to ID below for non-declarations
		case fBy, fTo, fObserver:
			if names != nil {
				if w, ok := names[s]; ok {
					s = w
				} else {
					names[s] = s
				}
			}
			e.setParty(f, s)
		case fOn:
			e.On = s
		case fUntil:
			e.Until = s
		case fTask:
			e.Task = s
		case fAs:
			e.As = s
		case fReason:
			e.Reason = s
		case fState:
			e.State = s
		case fNote:
			e.Note = s
		}
		return nil
	})
	if err != nil {
		return Event{}, err
	}
	e.named = names != nil
	if seen&(1<<fType) == 0 {
		return Event{}, &family.DecodeError{Field: "type", Msg: "missing"}
	}
	if !Known(e.Type) {
		return Event{Type: e.Type}, fmt.Errorf("%w %q", family.ErrUnknownType, e.Type)
	}
	if e.Type != TypePromise {
		e.ID, e.Text = e.Text, ""
	}
	if err := e.wellFormed(); err != nil {
		return Event{}, err
	}
	return e, nil
}

// readTS sets e's ts from its text, read in place.
func readTS[T string | []byte](e *Event, v T) error {
	t, rule := instant.Read(v)
	if rule != "" {
		return &family.DecodeError{Field: "ts", Msg: rule}
	}
	e.TS = t
	return nil
}

func (e *Event) setParty(f field, v string) {
	switch f {
	case fBy:
		e.By = v
	case fTo:
		e.To = v
	case fObserver:
		e.Observer = v
	}
}

// plain returns the body of a JSON string value that has no escapes, which
// is then its text byte for byte.
func plain(v []byte) ([]byte, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return nil, false
	}
	body := v[1 : len(v)-1]
	for _, c := range body {
		if c == '\\' {
			return nil, false
		}
	}
	return body, true
}

// constant returns the one of cs that raw spells, or "".
func constant(raw []byte, cs ...string) string {
	for _, c := range cs {
		if string(raw) == c {
			return c
		}
	}
	return ""
}

// wellFormed checks the shape a record must have to be folded at all. It is
// looser than Decide: a record written by another tool is kept if it can be
// understood.
func (e *Event) wellFormed() error {
	need := func(field, v string) error {
		if v == "" {
			return &family.DecodeError{Field: field, Msg: "missing"}
		}
		return nil
	}
	if e.TS.IsZero() {
		return &family.DecodeError{Field: "ts", Msg: "missing"}
	}
	switch e.Type {
	case TypePromise:
		if err := need("id", e.ID); err != nil {
			return err
		}
		if err := need("until", e.Until); err != nil {
			return err
		}
	case TypeAmend:
		if err := need("promise", e.ID); err != nil {
			return err
		}
		if err := need("until", e.Until); err != nil {
			return err
		}
	case TypeResolve:
		if err := need("promise", e.ID); err != nil {
			return err
		}
		switch e.As {
		case AsSatisfied, AsCancelled, AsReleased:
		default:
			return &family.DecodeError{Field: "as", Msg: "must be satisfied, cancelled or released"}
		}
	case TypeAssess:
		if err := need("promise", e.ID); err != nil {
			return err
		}
	}
	if e.Until != "" {
		t, rule := instant.Read(e.Until)
		if rule != "" {
			return &family.DecodeError{Field: "until", Msg: rule}
		}
		e.until, e.untilSet = instant.Pack(t), true
	}
	return nil
}

type field uint8

const (
	fNone field = iota
	fTS
	fType
	fID
	fPromise
	fBy
	fTo
	fOn
	fUntil
	fTask
	fAs
	fEvidence
	fReason
	fState
	fObserver
	fNote
	fMeta
)

var fieldNames = [...]string{"", "ts", "type", "id", "promise", "by", "to", "on", "until", "task", "as", "evidence", "reason", "state", "observer", "note", "meta"}

func fieldOf(key []byte) field {
	switch string(key) {
	case "ts":
		return fTS
	case "type":
		return fType
	case "id":
		return fID
	case "promise":
		return fPromise
	case "by":
		return fBy
	case "to":
		return fTo
	case "on":
		return fOn
	case "until":
		return fUntil
	case "task":
		return fTask
	case "as":
		return fAs
	case "evidence":
		return fEvidence
	case "reason":
		return fReason
	case "state":
		return fState
	case "observer":
		return fObserver
	case "note":
		return fNote
	case "meta":
		return fMeta
	}
	return fNone
}

// Encode writes the record in pinki's exact shape: ts and type first, the
// family's fields in pinki's order, optional fields only when set, meta last.
func (e *Event) Encode() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"ts":`...)
	b = instant.AppendQuoted(b, e.TS)
	b = append(b, `,"type":`...)
	b = jsonline.AppendString(b, e.Type)
	str := func(name, v string) {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b = jsonline.AppendString(b, v)
	}
	opt := func(name, v string) {
		if v != "" {
			str(name, v)
		}
	}
	switch e.Type {
	case TypePromise:
		str("id", e.ID)
		str("promise", e.Text)
		str("by", e.By)
		str("to", e.To)
		opt("on", e.On)
		str("until", e.Until)
		opt("task", e.Task)
	case TypeAmend:
		str("promise", e.ID)
		str("by", e.By)
		str("until", e.Until)
		opt("reason", e.Reason)
	case TypeResolve:
		str("promise", e.ID)
		str("as", e.As)
		str("by", e.By)
		if e.As == AsSatisfied || len(e.Evidence) > 0 {
			b = append(b, `,"evidence":`...)
			b = jsonline.AppendStrings(b, e.Evidence)
		}
		opt("reason", e.Reason)
	case TypeAssess:
		str("promise", e.ID)
		str("state", e.State)
		str("observer", e.Observer)
		opt("note", e.Note)
	}
	if e.Meta != "" {
		b = append(b, `,"meta":`...)
		b = append(b, e.Meta...)
	}
	return append(b, '}')
}

// Party is the identity a record names as its actor: the debtor on a
// declaration or amend, the resolver on a resolve, the observer on an
// assessment. The log records the acting identity only where it differs.
func (e *Event) Party() string {
	if e.Type == TypeAssess {
		return e.Observer
	}
	return e.By
}

// PeekType returns a line's "type" member without decoding the rest.
func PeekType(line []byte) (string, error) {
	var typ string
	errFound := errors.New("found")
	err := jsonline.Object(line, func(key, v []byte) error {
		if string(key) == "type" {
			s, err := jsonline.String(v)
			if err != nil {
				return err
			}
			typ = s
			return errFound
		}
		return nil
	})
	if err != nil && err != errFound {
		return "", err
	}
	return typ, nil
}
