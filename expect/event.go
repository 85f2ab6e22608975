package expect

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"tally/family"
	"tally/instant"
	"tally/jsonline"
	"tally/vocab"
)

// Record types of the expectations family, as written in "type". Stored in
// every ledger: do not rename.
const (
	TypeRaise       = "expect.raise"
	TypeWithdraw    = "expect.withdraw"
	TypeFact        = "fact"
	TypeLapse       = "lapse"
	TypeTaskOutcome = "task.outcome"
)

// EnvelopeKey is the member tally's log adds to every line (seq, actor,
// hash). Decode skips it; it is never part of an Event.
const EnvelopeKey = "tally"

// IDMax bounds every identifier (expectation, task, lapse ids).
const IDMax = 128

// MembersMax bounds the members of one record or nested object, so a
// hostile line cannot make duplicate detection quadratic in its length.
const MembersMax = 256

// Basis says where a due time came from. Stored: do not rename.
type Basis string

const (
	BasisObserved Basis = "observed" // measured from how this lane really behaves
	BasisContract Basis = "contract" // taken from a contract or service level
	BasisDeclared Basis = "declared" // stated by the agent with no better source
)

func (b Basis) valid() bool {
	return b == BasisObserved || b == BasisContract || b == BasisDeclared
}

// LapseKind names one of the three ways an expectation goes unmet. Stored:
// do not rename.
type LapseKind string

const (
	// LapseOverdue: the current due time plus grace passed while unsatisfied.
	LapseOverdue LapseKind = "overdue"
	// LapseSkipped: a later step on the same subject (one whose after names
	// this expectation) was satisfied while this one was open.
	LapseSkipped LapseKind = "skipped"
	// LapseStalled: the horizon passed with no fact of any kind recorded on
	// the subject since the expectation was raised.
	LapseStalled LapseKind = "stalled"
)

func (k LapseKind) valid() bool {
	return k == LapseOverdue || k == LapseSkipped || k == LapseStalled
}

// rank orders lapse kinds that fall due at the same instant.
func (k LapseKind) rank() int {
	switch k {
	case LapseOverdue:
		return 0
	case LapseSkipped:
		return 1
	}
	return 2
}

// Outcome is an origin task's terminal outcome. Stored: do not rename.
type Outcome string

const (
	OutcomeCompleted Outcome = "completed"
	OutcomeCancelled Outcome = "cancelled" // withdraws the task's open expectations
	OutcomeFailed    Outcome = "failed"    // withdraws the task's open expectations
)

func (o Outcome) valid() bool {
	return o == OutcomeCompleted || o == OutcomeCancelled || o == OutcomeFailed
}

// withdraws reports whether this outcome withdraws open expectations.
func (o Outcome) withdraws() bool { return o == OutcomeCancelled || o == OutcomeFailed }

// Subject is what an expectation is about: "subject": {"type","id"}.
type Subject struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// String renders the subject as the CLI writes it: TYPE:ID.
func (s Subject) String() string { return s.Type + ":" + s.ID }

// Anchor makes a step's current due follow its predecessor's actual time:
// "anchor": {"expectationId","offset"}.
type Anchor struct {
	ExpectationID string
	Offset        time.Duration // ISO 8601 duration on the wire, never negative
}

// Origin is the A2A task and context an expectation was raised on:
// "origin": {"taskId","contextId"}.
type Origin struct {
	TaskID    string `json:"taskId,omitempty"`
	ContextID string `json:"contextId,omitempty"`
}

// ReplyTo says where the raising agent takes word of its expectation's
// lapses over A2A: "replyTo": {"url","extension"?,"push"?:{"url","token"?,
// "authentication"?:{"scheme","credentials"?}}}. URL is the agent's A2A
// JSON-RPC endpoint or its agent card's URL; Extension is the extension URI
// the expectation was raised under (the lapse comes back under it); push is
// an A2A push-notification config: its URL, its token (sent as
// A2A-Notification-Token) and its authentication (sent as "Authorization:
// scheme credentials", e.g. Bearer or Basic). At least one of URL and
// PushURL is set. Token and credentials are stored in the ledger as given
// (views show "set"): use ones meant for this.
type ReplyTo struct {
	URL       string
	Extension string
	PushURL   string
	PushToken string
	// PushAuthScheme and PushAuthCredentials are the push config's
	// authentication (A2A AuthenticationInfo).
	PushAuthScheme      string
	PushAuthCredentials string
}

// replyToJSON is a ReplyTo's shape in views and notices: the record's.
type replyToJSON struct {
	URL       string    `json:"url,omitempty"`
	Extension string    `json:"extension,omitempty"`
	Push      *pushJSON `json:"push,omitempty"`
}

type pushJSON struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	Auth  *struct {
		Scheme      string `json:"scheme"`
		Credentials string `json:"credentials,omitempty"`
	} `json:"authentication,omitempty"`
}

// MarshalJSON writes the record's shape (see ReplyTo).
func (rt ReplyTo) MarshalJSON() ([]byte, error) {
	j := replyToJSON{URL: rt.URL, Extension: rt.Extension}
	if rt.hasPush() {
		j.Push = &pushJSON{URL: rt.PushURL, Token: rt.PushToken}
		if rt.PushAuthScheme != "" || rt.PushAuthCredentials != "" {
			j.Push.Auth = &struct {
				Scheme      string `json:"scheme"`
				Credentials string `json:"credentials,omitempty"`
			}{rt.PushAuthScheme, rt.PushAuthCredentials}
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (rt *ReplyTo) UnmarshalJSON(b []byte) error {
	var j replyToJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*rt = ReplyTo{URL: j.URL, Extension: j.Extension}
	if j.Push != nil {
		rt.PushURL, rt.PushToken = j.Push.URL, j.Push.Token
		if j.Push.Auth != nil {
			rt.PushAuthScheme, rt.PushAuthCredentials = j.Push.Auth.Scheme, j.Push.Auth.Credentials
		}
	}
	return nil
}

func (rt *ReplyTo) hasPush() bool {
	return rt.PushURL != "" || rt.PushToken != "" || rt.PushAuthScheme != "" || rt.PushAuthCredentials != ""
}

// ReplyToMax bounds each member of a ReplyTo, in bytes.
const ReplyToMax = 2048

// Raise is the body of an expect.raise record: the draft's fields, the
// origin it was raised on and who raised it. Immutable once recorded.
type Raise struct {
	ExpectationID string        // "expectationId"
	Kind          string        // "kind"
	Subject       Subject       // "subject"
	Expects       string        // "expects": what is expected, in words (optional)
	FactKey       string        // "satisfiedBy": {"factKey"}: the exact key that satisfies
	DueAt         time.Time     // "dueAt": required; the projected due
	Grace         time.Duration // "grace": ISO 8601 duration, omitted when zero
	Anchor        *Anchor       // "anchor" (optional)
	After         []string      // "after": expectations this step follows (optional)
	Horizon       time.Time     // "horizon": zero when absent
	Basis         Basis         // "basis": required
	Supersedes    string        // "supersedes": the expectation this one extends (optional)
	Origin        Origin        // "origin" (optional; zero when absent)
	ReplyTo       *ReplyTo      // "replyTo": where lapses go over A2A (optional)
	By            string        // "by": who raised it
	Human         bool          // "human": raised by a person (written only when true)
	// Producer is the seat expected to produce the satisfying fact
	// (optional, written only when set): its prime lists the expectation.
	// A reader that predates it keeps the member as an unknown one.
	Producer string // "producer"
}

// Withdraw is the body of an expect.withdraw record.
type Withdraw struct {
	ExpectationID string // "expectationId"
	By            string // "by"
	Reason        string // "reason" (optional)
}

// Fact is the body of a fact record: a key observed on a subject.
type Fact struct {
	FactKey string    // "factKey"
	Subject Subject   // "subject"
	At      time.Time // "at": when it happened; defaults to ts when absent
	By      string    // "by": who observed it (optional)
}

// Lapse is the body of a lapse record, committed only by the timekeeper.
// The record's ts is the time the lapse was noticed.
type Lapse struct {
	LapseID       string    // "lapseId": LapseID(expectationId, lapse, dueAt)
	ExpectationID string    // "expectationId"
	Kind          LapseKind // "lapse"
	DueAt         time.Time // "dueAt": the due time in force when it lapsed
	LapsedAt      time.Time // "lapsedAt": the instant the lapse condition became true
	By            string    // "by": the timekeeper
}

// TaskOutcome is the body of a task.outcome record: an origin task ended.
type TaskOutcome struct {
	TaskID  string  // "taskId"
	Outcome Outcome // "outcome"
	By      string  // "by" (optional)
}

// Field is a member of a record that this package does not know, kept with
// its value's raw (compacted) bytes so Encode writes it back.
type Field = jsonline.Field

// Event is one decoded record of the family. Exactly one body pointer is
// set, the one matching Type.
type Event struct {
	TS          time.Time // "ts"
	Type        string    // "type"
	Raise       *Raise
	Withdraw    *Withdraw
	Fact        *Fact
	Lapse       *Lapse
	TaskOutcome *TaskOutcome
	Extra       []Field // unknown members in line order (never EnvelopeKey)
}

// Known reports whether typ is a record type of this family.
func Known(typ string) bool {
	switch typ {
	case TypeRaise, TypeWithdraw, TypeFact, TypeLapse, TypeTaskOutcome:
		return true
	}
	return false
}

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

// ParseTime reads an RFC 3339 UTC time ("2026-09-01T17:00:00Z") that tally
// keeps exactly (instant.Problem). Offsets other than Z are refused so that
// every stored time has one spelling.
func ParseTime(s string) (time.Time, error) {
	t, rule := instant.Read(s)
	if rule == instant.SyntaxRule || !strings.HasSuffix(s, "Z") {
		return time.Time{}, errors.New("must be an RFC 3339 UTC time ending in Z")
	}
	// The zero instant would read as "none" (a fact at it as now, a
	// horizon at it as no horizon): refused with the rest of what tally
	// cannot keep.
	if rule != "" {
		return time.Time{}, errors.New(rule)
	}
	return t, nil
}

// durationMax bounds grace and offsets: a century is far longer than any
// grace, offset or extension.
const durationMax = 100 * 366 * 24 * time.Hour

// ParseDuration reads an ISO 8601 duration, the form stored on the wire
// (instant.ParseISODuration: weeks, days, hours, minutes and seconds, such
// as "PT6H", "P1W", "P1DT2H30M", "PT0.5S"). Years and months are refused:
// their length depends on the calendar. Negative durations are refused.
func ParseDuration(s string) (time.Duration, error) {
	d, err := instant.ParseISODuration("", s)
	if r, ok := vocab.As(err); ok {
		return 0, errors.New(r.Rule)
	}
	return d, err
}

// FormatDuration writes d in the one canonical ISO 8601 spelling this
// package emits: hours, minutes and seconds ("PT6H", "PT1H45M", "PT0S").
func FormatDuration(d time.Duration) string {
	if d < 0 {
		panic("expect: negative duration")
	}
	return instant.FormatISOSpan(int64(d/time.Second), int64(d%time.Second))
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

// Encode returns the record's exact wire bytes: one JSON object, no
// newline, "ts" and "type" first, the type's members in a fixed order,
// optional members omitted when empty, then Extra in order.
func (e Event) Encode() []byte {
	b := make([]byte, 0, 256)
	b = append(b, `{"ts":`...)
	b = jsonline.AppendString(b, instant.Format(e.TS))
	b = append(b, `,"type":`...)
	b = jsonline.AppendString(b, e.Type)
	switch {
	case e.Raise != nil:
		r := e.Raise
		b = appendMember(b, "expectationId", r.ExpectationID)
		b = appendMember(b, "kind", r.Kind)
		b = append(b, `,"subject":`...)
		b = appendSubject(b, r.Subject)
		b = appendOptional(b, "expects", r.Expects)
		b = append(b, `,"satisfiedBy":{"factKey":`...)
		b = jsonline.AppendString(b, r.FactKey)
		b = append(b, '}')
		b = appendMember(b, "dueAt", instant.Format(r.DueAt))
		if r.Grace != 0 {
			b = appendMember(b, "grace", FormatDuration(r.Grace))
		}
		if r.Anchor != nil {
			b = append(b, `,"anchor":{"expectationId":`...)
			b = jsonline.AppendString(b, r.Anchor.ExpectationID)
			b = append(b, `,"offset":`...)
			b = jsonline.AppendString(b, FormatDuration(r.Anchor.Offset))
			b = append(b, '}')
		}
		if len(r.After) > 0 {
			b = append(b, `,"after":[`...)
			for i, id := range r.After {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonline.AppendString(b, id)
			}
			b = append(b, ']')
		}
		if !r.Horizon.IsZero() {
			b = appendMember(b, "horizon", instant.Format(r.Horizon))
		}
		b = appendMember(b, "basis", string(r.Basis))
		b = appendOptional(b, "supersedes", r.Supersedes)
		if r.Origin != (Origin{}) {
			b = append(b, `,"origin":{`...)
			if r.Origin.TaskID != "" {
				b = append(b, `"taskId":`...)
				b = jsonline.AppendString(b, r.Origin.TaskID)
			}
			if r.Origin.ContextID != "" {
				if r.Origin.TaskID != "" {
					b = append(b, ',')
				}
				b = append(b, `"contextId":`...)
				b = jsonline.AppendString(b, r.Origin.ContextID)
			}
			b = append(b, '}')
		}
		if rt := r.ReplyTo; rt != nil {
			b = append(b, `,"replyTo":{`...)
			sep := ""
			if rt.URL != "" {
				b = append(b, `"url":`...)
				b = jsonline.AppendString(b, rt.URL)
				sep = ","
			}
			if rt.Extension != "" {
				b = append(b, sep+`"extension":`...)
				b = jsonline.AppendString(b, rt.Extension)
				sep = ","
			}
			if rt.hasPush() {
				b = append(b, sep+`"push":{"url":`...)
				b = jsonline.AppendString(b, rt.PushURL)
				b = appendOptional(b, "token", rt.PushToken)
				if rt.PushAuthScheme != "" || rt.PushAuthCredentials != "" {
					b = append(b, `,"authentication":{"scheme":`...)
					b = jsonline.AppendString(b, rt.PushAuthScheme)
					b = appendOptional(b, "credentials", rt.PushAuthCredentials)
					b = append(b, '}')
				}
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = appendMember(b, "by", r.By)
		if r.Human {
			b = append(b, `,"human":true`...)
		}
		b = appendOptional(b, "producer", r.Producer)
	case e.Withdraw != nil:
		w := e.Withdraw
		b = appendMember(b, "expectationId", w.ExpectationID)
		b = appendMember(b, "by", w.By)
		b = appendOptional(b, "reason", w.Reason)
	case e.Fact != nil:
		f := e.Fact
		b = appendMember(b, "factKey", f.FactKey)
		b = append(b, `,"subject":`...)
		b = appendSubject(b, f.Subject)
		at := f.At
		if at.IsZero() {
			at = e.TS
		}
		b = appendMember(b, "at", instant.Format(at))
		b = appendOptional(b, "by", f.By)
	case e.Lapse != nil:
		l := e.Lapse
		b = appendMember(b, "lapseId", l.LapseID)
		b = appendMember(b, "expectationId", l.ExpectationID)
		b = appendMember(b, "lapse", string(l.Kind))
		b = appendMember(b, "dueAt", instant.Format(l.DueAt))
		b = appendMember(b, "lapsedAt", instant.Format(l.LapsedAt))
		b = appendMember(b, "by", l.By)
	case e.TaskOutcome != nil:
		o := e.TaskOutcome
		b = appendMember(b, "taskId", o.TaskID)
		b = appendMember(b, "outcome", string(o.Outcome))
		b = appendOptional(b, "by", o.By)
	}
	b = jsonline.AppendFields(b, e.Extra)
	return append(b, '}')
}

func appendMember(b []byte, key, value string) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return jsonline.AppendString(b, value)
}

// isAuthScheme reports whether s is an HTTP token (RFC 9110 §5.6.2), the
// form of an authentication scheme's name.
func isAuthScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

func appendOptional(b []byte, key, value string) []byte {
	if value == "" {
		return b
	}
	return appendMember(b, key, value)
}

func appendSubject(b []byte, s Subject) []byte {
	b = append(b, `{"type":`...)
	b = jsonline.AppendString(b, s.Type)
	b = append(b, `,"id":`...)
	b = jsonline.AppendString(b, s.ID)
	return append(b, '}')
}

// problem names the first member of a ReplyTo that cannot be used: URLs are
// absolute http or https URLs with a host, every member is bounded and has
// no control characters, and a push token needs a push URL.
func (rt *ReplyTo) problem() (field, msg string) {
	if rt.URL == "" && rt.PushURL == "" {
		return "replyTo.url", "missing: give the agent's A2A URL or a push URL"
	}
	for _, f := range []struct{ name, value string }{
		{"replyTo.url", rt.URL}, {"replyTo.extension", rt.Extension},
		{"replyTo.push.url", rt.PushURL}, {"replyTo.push.token", rt.PushToken},
		{"replyTo.push.authentication.scheme", rt.PushAuthScheme},
		{"replyTo.push.authentication.credentials", rt.PushAuthCredentials},
	} {
		if len(f.value) > ReplyToMax {
			return f.name, fmt.Sprintf("longer than %d bytes", ReplyToMax)
		}
		for _, c := range f.value {
			if c < 0x20 || c == 0x7f {
				return f.name, "must not hold control characters"
			}
		}
	}
	for _, f := range []struct{ name, value string }{{"replyTo.url", rt.URL}, {"replyTo.push.url", rt.PushURL}} {
		if f.value == "" {
			continue
		}
		u, err := url.Parse(f.value)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return f.name, "must be an absolute http or https URL"
		}
	}
	if rt.PushToken != "" && rt.PushURL == "" {
		return "replyTo.push.url", "required with replyTo.push.token"
	}
	if rt.PushAuthScheme != "" || rt.PushAuthCredentials != "" {
		if rt.PushURL == "" {
			return "replyTo.push.url", "required with replyTo.push.authentication"
		}
		if !isAuthScheme(rt.PushAuthScheme) {
			return "replyTo.push.authentication.scheme", "must be an HTTP authentication scheme name such as Bearer or Basic (letters, digits and !#$%&'*+-.^_`|~)"
		}
		if strings.TrimSpace(rt.PushAuthCredentials) != rt.PushAuthCredentials {
			return "replyTo.push.authentication.credentials", "must not start or end with white space"
		}
	}
	return "", ""
}
