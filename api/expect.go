package api

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"tally/expect"
	"tally/instant"
	"tally/refuse"
)

// The expectation family's documents, in the draft's names (camelCase):
// what `tally expect raise -` reads on stdin, the bodies of the
// expectation routes and an A2A expect record (with "action"). Times are
// RFC 3339 UTC, durations ISO 8601.

// ExpectRaise is the document of an expectation raised, or of an extension
// of the one it supersedes (whose terms it leaves out are inherited, in the
// expect core).
//
// Encoded, a document leaves out the terms it does not give; after is
// always written, null when not given, because an empty list is a term (an
// extension that follows no step) and a missing one is inherited.
type ExpectRaise struct {
	ExpectationID string          `json:"expectationId,omitempty"`
	Kind          string          `json:"kind,omitempty"`
	Subject       *expect.Subject `json:"subject,omitempty"`
	Expects       string          `json:"expects,omitempty"`
	SatisfiedBy   *FactKeyRef     `json:"satisfiedBy,omitempty"`
	DueAt         string          `json:"dueAt,omitempty"`
	Grace         string          `json:"grace,omitempty"`
	Anchor        *AnchorRef      `json:"anchor,omitempty"`
	After         []string        `json:"after"`
	Horizon       string          `json:"horizon,omitempty"`
	Basis         string          `json:"basis,omitempty"`
	Supersedes    string          `json:"supersedes,omitempty"`
	Origin        *expect.Origin  `json:"origin,omitempty"`
	By            string          `json:"by,omitempty"` // the raiser: the acting identity when given
	// Producer is the seat expected to produce the satisfying fact: its
	// prime lists the expectation.
	Producer string `json:"producer,omitempty" jsonschema:"seat expected to produce the fact"`
	// ReplyTo is where the timekeeper sends the expectation's lapses over
	// A2A: an agent's URL, or {"url","extension","push":{"url","token",
	// "authentication":{"scheme","credentials"}}} (ParseReplyTo).
	ReplyTo json.RawMessage `json:"replyTo,omitempty"`

	// RelativeTo, when set, lets dueAt and horizon also be a duration from
	// it (2h, PT6H), and grace and anchor.offset a duration in the short
	// form too (90m, 1d), as the CLI's flags and MCP's arguments give
	// them: the document keeps what was asked, so a retry under the same
	// request id asks the same, and is read at RelativeTo (the client's
	// clock). Zero, they must be RFC 3339 UTC instants and ISO 8601
	// durations, as a REST body and an A2A record give them.
	RelativeTo time.Time `json:"-"`
}

// FactKeyRef is a raise's "satisfiedBy": the exact fact key.
type FactKeyRef struct {
	FactKey string `json:"factKey"`
}

// AnchorRef is a raise's "anchor": ID and an ISO 8601 offset.
type AnchorRef struct {
	ExpectationID string `json:"expectationId"`
	Offset        string `json:"offset"`
}

// Absolute is d with its relative times read at d.RelativeTo and its
// durations in ISO 8601, as a REST body takes it.
func (d ExpectRaise) Absolute() (ExpectRaise, error) {
	if d.RelativeTo.IsZero() {
		return d, nil
	}
	if d.Grace != "" {
		g, err := d.duration("grace", d.Grace)
		if err != nil {
			return d, err
		}
		d.Grace = expect.FormatDuration(g)
	}
	if d.Anchor != nil {
		off, err := d.duration("anchor.offset", d.Anchor.Offset)
		if err != nil {
			return d, err
		}
		d.Anchor = &AnchorRef{ExpectationID: d.Anchor.ExpectationID, Offset: expect.FormatDuration(off)}
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"dueAt", &d.DueAt}, {"horizon", &d.Horizon}} {
		if *f.v == "" {
			continue
		}
		t, err := d.instant(f.name, *f.v)
		if err != nil {
			return d, err
		}
		*f.v = instant.Format(t)
	}
	d.RelativeTo = time.Time{}
	return d, nil
}

// instant reads the time v of member field.
func (d *ExpectRaise) instant(field, v string) (time.Time, error) {
	if !d.RelativeTo.IsZero() {
		return instant.Deadline(field, v, d.RelativeTo)
	}
	t, err := expect.ParseTime(v)
	if err != nil {
		return t, refuse.Invalidf(field, err.Error())
	}
	return t, nil
}

// duration reads the duration v of member field: ISO 8601, and where d is
// read at a clock (RelativeTo) also the short form (90m, 2h, 1d).
func (d *ExpectRaise) duration(field, v string) (time.Duration, error) {
	if !d.RelativeTo.IsZero() {
		return instant.ParseDuration(field, v)
	}
	t, err := expect.ParseDuration(v)
	if err != nil {
		return t, refuse.Invalidf(field, err.Error())
	}
	return t, nil
}

// MintExpectationID returns a fresh expectation id: exp_ and 12 hex digits,
// for a document that names none.
func MintExpectationID() string {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("api: no randomness: " + err.Error())
	}
	return "exp_" + hex.EncodeToString(b[:])
}

// Raise is the raise command of the document (an id minted when it names
// none).
func (d *ExpectRaise) Raise() (expect.Raise, error) { return d.convert(false) }

// Supersede is the extension of d.Supersedes: the terms it leaves out are
// the core's to inherit.
func (d *ExpectRaise) Supersede() (expect.SupersedeCommand, error) {
	r, err := d.convert(true)
	return expect.SupersedeCommand{Raise: r, GraceGiven: d.Grace != ""}, err
}

func (d *ExpectRaise) convert(extend bool) (expect.Raise, error) {
	r := expect.Raise{ExpectationID: d.ExpectationID, Kind: d.Kind, Expects: d.Expects, After: d.After,
		Basis: expect.Basis(d.Basis), Supersedes: d.Supersedes, By: d.By, Producer: d.Producer}
	if r.ExpectationID == "" {
		r.ExpectationID = MintExpectationID()
	}
	if d.Subject == nil && !extend {
		return r, refuse.Invalidf("subject", "required: {\"type\",\"id\"}")
	}
	if d.Subject != nil {
		r.Subject = *d.Subject
	}
	if d.SatisfiedBy != nil {
		r.FactKey = d.SatisfiedBy.FactKey
	}
	if d.Origin != nil {
		r.Origin = *d.Origin
	}
	var err error
	if d.DueAt == "" && !extend {
		return r, refuse.Invalidf("dueAt", "required: there is no open-ended expectation")
	}
	if d.DueAt != "" {
		if r.DueAt, err = d.instant("dueAt", d.DueAt); err != nil {
			return r, err
		}
	}
	if d.Grace != "" {
		if r.Grace, err = d.duration("grace", d.Grace); err != nil {
			return r, err
		}
	}
	if d.Horizon != "" {
		if r.Horizon, err = d.instant("horizon", d.Horizon); err != nil {
			return r, err
		}
	}
	if r.ReplyTo, err = ParseReplyTo("replyTo", d.ReplyTo); err != nil {
		return r, err
	}
	if d.Anchor != nil {
		off, err := d.duration("anchor.offset", d.Anchor.Offset)
		if err != nil {
			return r, err
		}
		r.Anchor = &expect.Anchor{ExpectationID: d.Anchor.ExpectationID, Offset: off}
	}
	return r, nil
}

// ParseReplyTo reads a replyTo member: absent or null is none; a string is
// an agent's URL; an object is {"url","extension","push":{"url","token",
// "authentication":{"scheme","credentials"}}}, members other than these
// refused.
func ParseReplyTo(field string, raw json.RawMessage) (*expect.ReplyTo, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return &expect.ReplyTo{URL: s}, nil
	}
	var d ReplyTo
	if err := Decode(field, raw, &d); err != nil {
		return nil, err
	}
	rt := &expect.ReplyTo{URL: d.URL, Extension: d.Extension}
	if d.Push != nil {
		rt.PushURL, rt.PushToken = d.Push.URL, d.Push.Token
		if d.Push.Auth != nil {
			rt.PushAuthScheme, rt.PushAuthCredentials = d.Push.Auth.Scheme, d.Push.Auth.Credentials
		}
	}
	return rt, nil
}

// ReplyTo is a replyTo member written as an object: ParseReplyTo's
// members, the schema MCP lists for it.
type ReplyTo struct {
	URL       string     `json:"url"`
	Extension string     `json:"extension,omitempty"`
	Push      *ReplyPush `json:"push,omitempty"`
}

// ReplyPush is a replyTo's push notification config.
type ReplyPush struct {
	URL   string     `json:"url"`
	Token string     `json:"token,omitempty"`
	Auth  *ReplyAuth `json:"authentication,omitempty"`
}

// ReplyAuth is how a push notification authenticates.
type ReplyAuth struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// ExpectFact is the document of an observed fact; at defaults to now (in
// the expect core).
type ExpectFact struct {
	FactKey string          `json:"factKey"`
	Subject *expect.Subject `json:"subject"`
	At      string          `json:"at,omitempty"`
}

// Command is the fact, its time read by parse (the REST API takes any RFC
// 3339 time, an A2A record one in UTC).
func (d *ExpectFact) Command(parse func(field, v string) (time.Time, error)) (expect.FactCommand, error) {
	if d.Subject == nil {
		return expect.FactCommand{}, refuse.Invalidf("subject", "required: {\"type\",\"id\"}")
	}
	cmd := expect.FactCommand{FactKey: d.FactKey, Subject: *d.Subject}
	if d.At != "" {
		t, err := parse("at", d.At)
		if err != nil {
			return cmd, err
		}
		cmd.At = t
	}
	return cmd, nil
}

// ParseInstant reads any RFC 3339 time (the REST API's fact time).
func ParseInstant(field, v string) (time.Time, error) { return instant.Parse(field, v) }

// ParseUTC reads an RFC 3339 UTC time ending in Z (an A2A record's).
func ParseUTC(field, v string) (time.Time, error) {
	t, err := expect.ParseTime(v)
	if err != nil {
		return t, refuse.Invalidf(field, err.Error())
	}
	return t, nil
}

// ExpectWithdraw is the document of a withdrawal of the expectation id
// names (the route's path, an A2A record's expectationId).
type ExpectWithdraw struct {
	Reason string `json:"reason,omitempty"`
}

func (d *ExpectWithdraw) Command(id string) expect.WithdrawCommand {
	return expect.WithdrawCommand{ExpectationID: id, Reason: d.Reason}
}

// ExpectTaskOutcome is the document of the outcome of the origin task
// task names (the route's path, an A2A record's taskId or its message's
// task). The outcome's values are the expect core's rule.
type ExpectTaskOutcome struct {
	Outcome string `json:"outcome"`
}

func (d *ExpectTaskOutcome) Command(task string) expect.TaskOutcomeCommand {
	return expect.TaskOutcomeCommand{TaskID: task, Outcome: expect.Outcome(d.Outcome)}
}

// ExpectLapse is the document of a lapse the timekeeper commits.
type ExpectLapse struct {
	ExpectationID string `json:"expectationId"`
	Lapse         string `json:"lapse"`
	DueAt         string `json:"dueAt,omitempty"`
}

func (d *ExpectLapse) Command() (expect.LapseCommand, error) {
	cmd := expect.LapseCommand{ExpectationID: d.ExpectationID, Kind: expect.LapseKind(d.Lapse)}
	if d.DueAt != "" {
		t, err := expect.ParseTime(d.DueAt)
		if err != nil {
			return cmd, refuse.Invalidf("dueAt", err.Error())
		}
		cmd.DueAt = t
	}
	return cmd, nil
}
