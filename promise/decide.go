package promise

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"tally/instant"
	"tally/jsonline"
	"tally/refuse"
	"tally/textcheck"
)

// Limits bounds every field a command may carry. They are part of the
// format's contract: raising one is compatible, lowering one is not.
type Limits struct {
	IDMax          int // characters in a supplied id (pinki: 128)
	TextMax        int // bytes of promise text, reason or note
	PartyMax       int // bytes of an identity (by, to, observer)
	EvidenceMax    int // references on one satisfied resolve
	EvidenceRefMax int // bytes of one evidence reference
	MetaMax        int // bytes of the meta object (pinki: 8 KiB)
}

// DefaultLimits returns the limits tally enforces unless configured otherwise.
func DefaultLimits() Limits {
	return Limits{IDMax: 128, TextMax: 16 << 10, PartyMax: 1024, EvidenceMax: 64, EvidenceRefMax: 4096, MetaMax: 8 << 10}
}

// Command is one of Declare, Amend, Resolve or Assess.
type Command interface{ isCommand() }

// Declare makes a promise. ID must be set: the caller mints one when the
// user supplied none (minting needs randomness, which this package avoids).
// By defaults to the acting identity, for every mode alike.
type Declare struct {
	ID, Text, By, To, On, Task string
	Until                      time.Time
	Meta                       string
}

// Amend moves a promise's deadline; the old one stays in its horizons.
type Amend struct {
	ID     string
	Until  time.Time
	Reason string
	Meta   string
}

// Resolve ends a promise as satisfied (with evidence), cancelled (with a
// reason) or released (by the creditor).
type Resolve struct {
	ID       string
	As       string
	Evidence []string
	Reason   string
	Meta     string
}

// Assess records an observer's judgment beside a promise.
type Assess struct {
	ID       string
	State    string // defaults to StateViolated, the only assessment
	Observer string // defaults to the acting identity; must equal it
	Note     string
	Meta     string
}

func (Declare) isCommand() {}
func (Amend) isCommand()   {}
func (Resolve) isCommand() {}
func (Assess) isCommand()  {}

// Decide checks a command against the rules and the current state, as the
// acting identity at now, and returns the record to append with any
// warnings. A refusal is a *refuse.Refusal naming the field and the rule. It
// is Prepare followed by Admit.
func (s *State) Decide(lim Limits, actor string, now time.Time, cmd Command) (Event, []string, error) {
	p, err := Prepare(lim, actor, now, cmd)
	if err != nil {
		return Event{}, nil, err
	}
	warn, err := s.Admit(&p)
	if err != nil {
		return Event{}, nil, err
	}
	if p.Recorded() {
		return Event{}, warn, nil // nothing to append
	}
	return p.Event, warn, nil
}

// Prepared is a command checked against every rule that does not depend on
// the state, with the record it appends if the state admits it.
type Prepared struct {
	Event Event
	actor string
	// recorded is the sequence of the assessment Event repeats (the same
	// observer, judgment, note and meta), found by Admit: an identical
	// assessment is recorded once, and the command appends nothing.
	recorded uint64
}

// Recorded reports whether Admit found the command already recorded (an
// identical assessment): there is nothing to append.
func (p *Prepared) Recorded() bool { return p.recorded != 0 }

// Prepare checks cmd, as the acting identity at now, against the rules that
// do not depend on the state and builds its record. A writer prepares (and
// encodes) outside the session lock; only Admit runs under it. The rules are
// checked in the same order as Decide checks them.
func Prepare(lim Limits, actor string, now time.Time, cmd Command) (Prepared, error) {
	if d, ok := cmd.(Declare); ok {
		return PrepareDeclare(lim, actor, now, d)
	}
	if err := checkParty(lim, "actor", actor); err != nil {
		return Prepared{}, err
	}
	ts := now.UTC().Truncate(time.Second)
	var ev Event
	var err error
	switch c := cmd.(type) {
	case Amend:
		ev, err = prepareAmend(lim, actor, ts, c)
	case Resolve:
		ev, err = prepareResolve(lim, actor, ts, c)
	case Assess:
		ev, err = prepareAssess(lim, actor, ts, c)
	default:
		panic("promise: unknown command type")
	}
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Event: ev, actor: actor}, nil
}

// PrepareDeclare is Prepare for a declaration, for a caller that holds one
// as a value (it need not be boxed as a Command).
func PrepareDeclare(lim Limits, actor string, now time.Time, c Declare) (Prepared, error) {
	if err := checkParty(lim, "actor", actor); err != nil {
		return Prepared{}, err
	}
	if c.By == "" {
		c.By = actor
	}
	ev, err := prepareDeclare(lim, actor, now.UTC().Truncate(time.Second), c)
	if err != nil {
		return Prepared{}, err
	}
	return Prepared{Event: ev, actor: actor}, nil
}

// Admit checks a prepared command against the state: a new id is unused;
// an amend or resolve finds its promise unresolved and comes from its
// debtor (a release from its creditor); an assessment finds its promise. It
// returns the warnings the record carries.
func (s *State) Admit(p *Prepared) ([]string, error) {
	return s.admit(p, nil)
}

// AdmitFresh is Admit for a declaration whose id was minted rather than
// chosen: while the id is taken, it gives the declaration another from
// fresh instead of refusing it.
func (s *State) AdmitFresh(p *Prepared, fresh func() string) ([]string, error) {
	return s.admit(p, fresh)
}

func (s *State) admit(p *Prepared, fresh func() string) ([]string, error) {
	ev, actor := &p.Event, p.actor
	switch ev.Type {
	case TypePromise:
		for _, dup := s.Get(ev.ID); dup; _, dup = s.Get(ev.ID) {
			if fresh == nil {
				return nil, refuse.Conflictf("id", "a promise with id "+ev.ID+" already exists")
			}
			ev.ID = fresh()
		}
		if ev.On != "" {
			if _, ok := s.Get(ev.On); !ok {
				return []string{"on: no promise " + ev.On + " in this ledger yet; " + ev.ID + " stays conditional until it is declared and satisfied"}, nil
			}
		}
		if ev.On == "" && ev.untilNanos() < instant.Pack(ev.TS) {
			// Owed from the start with its deadline behind it: overdue
			// already, which is seldom what was meant.
			return []string{"until: " + ev.Until + " has already passed: " + ev.ID + " is overdue from its declaration"}, nil
		}
	case TypeAmend:
		q, err := s.open(ev.ID, "amend")
		if err != nil {
			return nil, err
		}
		if actor != q.By {
			return nil, refuse.Forbiddenf("by", "only the debtor "+q.By+" amends "+q.ID+"; the acting identity is "+actor)
		}
	case TypeResolve:
		q, err := s.open(ev.ID, "resolve")
		if err != nil {
			return nil, err
		}
		if ev.As == AsReleased {
			if actor != q.To {
				return nil, refuse.Forbiddenf("by", "only the creditor "+q.To+" releases "+q.ID+"; the acting identity is "+actor)
			}
		} else if actor != q.By {
			return nil, refuse.Forbiddenf("by", "only the debtor "+q.By+" resolves "+q.ID+" as "+ev.As+"; the acting identity is "+actor)
		}
	case TypeAssess:
		if _, ok := s.Get(ev.ID); !ok {
			return nil, refuse.NotFoundf("promise", "no promise with id "+ev.ID)
		}
		if a, ok := s.RecordedAssessment(ev); ok {
			p.recorded = a.Seq
			return []string{RecordedWarning(ev.ID, a)}, nil
		}
	}
	return nil, nil
}

// RecordedWarning says that an assessment of promise id repeats a, which
// is recorded already.
func RecordedWarning(id string, a Assessment) string {
	return "assess: " + a.Observer + " already judged " + id + " " + a.State + " with this note (seq " +
		strconv.FormatUint(a.Seq, 10) + "); nothing appended"
}

// RecordedAssessment is the assessment beside ev's promise that ev (an
// assess record) repeats: the same observer, judgment, note and meta.
func (s *State) RecordedAssessment(ev *Event) (Assessment, bool) {
	q, ok := s.Get(ev.ID)
	if !ok || ev.Type != TypeAssess {
		return Assessment{}, false
	}
	for _, a := range q.Assessments {
		if a.Observer == ev.Observer && a.State == ev.State && a.Note == ev.Note && a.Meta == ev.Meta {
			return a, true
		}
	}
	return Assessment{}, false
}

func prepareDeclare(lim Limits, actor string, ts time.Time, c Declare) (Event, error) {
	if err := CheckID(lim, "id", c.ID); err != nil {
		return Event{}, err
	}
	if strings.TrimSpace(c.Text) == "" {
		return Event{}, refuse.Invalidf("promise", "text must not be empty")
	}
	if len(c.Text) > lim.TextMax {
		return Event{}, refuse.Invalidf("promise", "text must be at most "+itoa(lim.TextMax)+" bytes")
	}
	if err := textcheck.Text("promise", c.Text); err != nil {
		return Event{}, err
	}
	if err := checkParty(lim, "by", c.By); err != nil {
		return Event{}, err
	}
	if err := checkParty(lim, "to", c.To); err != nil {
		return Event{}, err
	}
	if c.On != "" {
		if err := CheckID(lim, "on", c.On); err != nil {
			return Event{}, err
		}
	}
	if c.Task != "" {
		if err := checkParty(lim, "task", c.Task); err != nil {
			return Event{}, err
		}
	}
	if c.Until.IsZero() {
		return Event{}, refuse.Invalidf("until", "a deadline is required")
	}
	if err := instant.Check("until", c.Until); err != nil {
		return Event{}, err
	}
	meta, err := NormalizeMeta(lim, c.Meta)
	if err != nil {
		return Event{}, err
	}
	if c.By != actor {
		return Event{}, refuse.Forbiddenf("by", "only the debtor declares its own promise: by is "+c.By+" but the acting identity is "+actor)
	}
	return Event{
		TS: ts, Type: TypePromise, ID: c.ID, Text: c.Text, By: c.By, To: c.To, On: c.On,
		Until: instant.Format(c.Until), Task: c.Task, Meta: meta,
	}, nil
}

// checkNoteAndMeta checks a record's free text other than the promise's
// own (a reason, a note: at most TextMax bytes that tally can keep) and
// normalizes its meta.
func checkNoteAndMeta(lim Limits, field, text, rawMeta string) (string, error) {
	if len(text) > lim.TextMax {
		return "", refuse.Invalidf(field, "must be at most "+itoa(lim.TextMax)+" bytes")
	}
	if err := textcheck.Text(field, text); err != nil {
		return "", err
	}
	return NormalizeMeta(lim, rawMeta)
}

func prepareAmend(lim Limits, actor string, ts time.Time, c Amend) (Event, error) {
	if c.Until.IsZero() {
		return Event{}, refuse.Invalidf("until", "a new deadline is required")
	}
	if err := instant.Check("until", c.Until); err != nil {
		return Event{}, err
	}
	meta, err := checkNoteAndMeta(lim, "reason", c.Reason, c.Meta)
	if err != nil {
		return Event{}, err
	}
	return Event{TS: ts, Type: TypeAmend, ID: c.ID, By: actor, Until: instant.Format(c.Until), Reason: c.Reason, Meta: meta}, nil
}

func prepareResolve(lim Limits, actor string, ts time.Time, c Resolve) (Event, error) {
	switch c.As {
	case AsSatisfied:
		if len(c.Evidence) == 0 {
			return Event{}, refuse.Invalidf("evidence", "a satisfied resolve needs at least one evidence reference")
		}
		if len(c.Evidence) > lim.EvidenceMax {
			return Event{}, refuse.Invalidf("evidence", "at most "+itoa(lim.EvidenceMax)+" references")
		}
		for _, ref := range c.Evidence {
			if strings.TrimSpace(ref) == "" {
				return Event{}, refuse.Invalidf("evidence", "a reference must not be blank")
			}
			if len(ref) > lim.EvidenceRefMax {
				return Event{}, refuse.Invalidf("evidence", "a reference must be at most "+itoa(lim.EvidenceRefMax)+" bytes")
			}
			if err := textcheck.Identifier("evidence", ref); err != nil {
				return Event{}, err
			}
		}
		if c.Reason != "" {
			return Event{}, refuse.Invalidf("reason", "a satisfied resolve carries evidence, not a reason")
		}
	case AsCancelled, AsReleased:
		if len(c.Evidence) > 0 {
			return Event{}, refuse.Invalidf("evidence", "only a satisfied resolve carries evidence")
		}
		if c.As == AsCancelled && strings.TrimSpace(c.Reason) == "" {
			return Event{}, refuse.Invalidf("reason", "cancelling needs a reason")
		}
	default:
		return Event{}, refuse.Invalidf("as", "must be satisfied, cancelled or released")
	}
	meta, err := checkNoteAndMeta(lim, "reason", c.Reason, c.Meta)
	if err != nil {
		return Event{}, err
	}
	return Event{TS: ts, Type: TypeResolve, ID: c.ID, As: c.As, By: actor, Evidence: c.Evidence, Reason: c.Reason, Meta: meta}, nil
}

func prepareAssess(lim Limits, actor string, ts time.Time, c Assess) (Event, error) {
	if c.State == "" {
		c.State = StateViolated
	}
	if c.State != StateViolated {
		return Event{}, refuse.Invalidf("state", "the only assessment is violated")
	}
	observer := c.Observer
	if observer == "" {
		observer = actor
	}
	if err := checkParty(lim, "observer", observer); err != nil {
		return Event{}, err
	}
	meta, err := checkNoteAndMeta(lim, "note", c.Note, c.Meta)
	if err != nil {
		return Event{}, err
	}
	if observer != actor {
		return Event{}, refuse.Forbiddenf("observer", "an observer assesses only as itself: observer is "+observer+" but the acting identity is "+actor)
	}
	return Event{TS: ts, Type: TypeAssess, ID: c.ID, State: c.State, Observer: observer, Note: c.Note, Meta: meta}, nil
}

// open returns an unresolved promise or the refusal for verb.
func (s *State) open(id, verb string) (*Promise, error) {
	p, ok := s.Get(id)
	if !ok {
		return nil, refuse.NotFoundf("promise", "no promise with id "+id)
	}
	if p.Resolution != nil {
		return nil, refuse.Conflictf("promise", "cannot "+verb+" "+id+": already resolved as "+p.Resolution.As)
	}
	return p, nil
}

// CheckID enforces pinki's id rule: 1–128 characters, no whitespace, and
// nothing textcheck.IdentifierFault refuses (controls, bidirectional overrides).
func CheckID(lim Limits, field, id string) error {
	if id == "" {
		return refuse.Invalidf(field, "must not be empty")
	}
	if !utf8.ValidString(id) {
		return refuse.Invalidf(field, "must be valid UTF-8")
	}
	if utf8.RuneCountInString(id) > lim.IDMax {
		return refuse.Invalidf(field, "must be at most "+itoa(lim.IDMax)+" characters")
	}
	for _, r := range id {
		if unicode.IsSpace(r) {
			return refuse.Invalidf(field, "must not contain whitespace")
		}
	}
	return textcheck.Identifier(field, id)
}

func checkParty(lim Limits, field, v string) error {
	if strings.TrimSpace(v) == "" {
		return refuse.Invalidf(field, "an identity is required")
	}
	if len(v) > lim.PartyMax || !utf8.ValidString(v) || hasControl(v) {
		return refuse.Invalidf(field, "must be at most "+itoa(lim.PartyMax)+" bytes of UTF-8 without control characters")
	}
	return nil
}

// NormalizeMeta enforces pinki's meta rule (absent, or a non-empty JSON
// object of at most 8 KiB) and returns the object compacted onto one line,
// since a record is one line of the log.
func NormalizeMeta(lim Limits, meta string) (string, error) {
	if meta == "" {
		return "", nil
	}
	b := []byte(strings.TrimSpace(meta))
	if !jsonline.Valid(b) || !jsonline.IsObject(b) {
		return "", refuse.Invalidf("meta", "must be a JSON object")
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return "", refuse.Invalidf("meta", "must be a JSON object")
	}
	if buf.Len() > lim.MetaMax {
		return "", refuse.Invalidf("meta", "must be at most "+itoa(lim.MetaMax)+" bytes")
	}
	empty := true
	_ = jsonline.Object(buf.Bytes(), func(_, _ []byte) error { empty = false; return nil })
	if empty {
		return "", refuse.Invalidf("meta", "must be a non-empty object")
	}
	return buf.String(), nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// ParseDeadline reads a deadline as the CLI and the server accept it: RFC
// 3339, or a duration counting forward from now such as 90m, 2h, 3d, 1d12h
// or PT6H (instant.Deadline, the rule every family shares). The result is
// UTC; a duration's result is truncated to the second.
func ParseDeadline(field, v string, now time.Time) (time.Time, error) {
	return instant.Deadline(field, v, now)
}
