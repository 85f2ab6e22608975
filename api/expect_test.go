package api

import (
	"strings"
	"testing"
	"time"

	"tally/expect"
)

// TestExpectRefusals pins the exact words of the expectation documents'
// refusals, decoded and converted as the REST routes do.
func TestExpectRefusals(t *testing.T) {
	raise := func(body string) error {
		var d ExpectRaise
		if err := Decode("body", []byte(body), &d); err != nil {
			return err
		}
		_, err := d.Raise()
		return err
	}
	supersede := func(body string) error {
		var d ExpectRaise
		if err := Decode("body", []byte(body), &d); err != nil {
			return err
		}
		_, err := d.Supersede()
		return err
	}
	fact := func(parse func(string, string) (time.Time, error)) func(string) error {
		return func(body string) error {
			var d ExpectFact
			if err := Decode("body", []byte(body), &d); err != nil {
				return err
			}
			_, err := d.Command(parse)
			return err
		}
	}
	lapse := func(body string) error {
		var d ExpectLapse
		if err := Decode("body", []byte(body), &d); err != nil {
			return err
		}
		_, err := d.Command()
		return err
	}
	outcome := func(body string) error {
		var d ExpectTaskOutcome
		return Decode("body", []byte(body), &d)
	}
	const subj = `"subject":{"type":"shipment","id":"PA-1"}`
	for _, tc := range []struct {
		name string
		run  func(string) error
		body string
		want string
	}{
		{"raise unknown", raise, `{"priority":1}`, "priority: is not a field of this command (after, anchor, basis, by, dueAt, expectationId, expects, grace, horizon, kind, origin, producer, replyTo, satisfiedBy, subject, supersedes)"},
		{"raise no subject", raise, `{"dueAt":"2026-12-02T00:00:00Z"}`, `subject: required: {"type","id"}`},
		{"raise no due", raise, `{` + subj + `}`, "dueAt: required: there is no open-ended expectation"},
		{"raise due offset", raise, `{` + subj + `,"dueAt":"2026-12-02T00:00:00+01:00"}`, "dueAt: must be an RFC 3339 UTC time ending in Z"},
		{"raise grace", raise, `{` + subj + `,"dueAt":"2026-12-02T00:00:00Z","grace":"soon"}`, "grace: "},
		{"raise anchor offset", raise, `{` + subj + `,"dueAt":"2026-12-02T00:00:00Z","anchor":{"expectationId":"e","offset":"x"}}`, "anchor.offset: "},
		{"raise subject type", raise, `{"subject":"shipment:PA-1"}`, "subject: must be an object, not string"},
		{"supersede horizon", supersede, `{"horizon":"2h"}`, "horizon: must be an RFC 3339 UTC time ending in Z"},
		{"fact no subject", fact(ParseInstant), `{"factKey":"k"}`, `subject: required: {"type","id"}`},
		{"fact unknown", fact(ParseInstant), `{"factKey":"k","by":"x"}`, "by: is not a field of this command (at, factKey, subject)"},
		{"fact at", fact(ParseInstant), `{"factKey":"k",` + subj + `,"at":"noon"}`, `at: "noon" is not an RFC 3339 time such as 2026-09-01T17:00:00Z`},
		{"fact at utc", fact(ParseUTC), `{"factKey":"k",` + subj + `,"at":"2026-12-01T12:00:00+01:00"}`, "at: must be an RFC 3339 UTC time ending in Z"},
		{"lapse due", lapse, `{"expectationId":"e","lapse":"overdue","dueAt":"x"}`, "dueAt: must be an RFC 3339 UTC time ending in Z"},
		{"outcome unknown", outcome, `{"outcome":"failed","taskId":"t"}`, "taskId: is not a field of this command (outcome)"},
	} {
		err := tc.run(tc.body)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) || (!strings.HasSuffix(tc.want, ": ") && err.Error() != tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestExpectCommands checks the documents make their commands: an id is
// minted when none is named, an extension leaves its terms to the core.
func TestExpectCommands(t *testing.T) {
	d := ExpectRaise{Subject: &expect.Subject{Type: "s", ID: "1"}, DueAt: "2026-12-02T00:00:00Z", Grace: "PT1H", By: "a"}
	r, err := d.Raise()
	if err != nil || !strings.HasPrefix(r.ExpectationID, "exp_") || len(r.ExpectationID) != 16 || r.Grace != time.Hour || r.By != "a" ||
		!r.DueAt.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("raise: %+v, %v", r, err)
	}
	s := ExpectRaise{ExpectationID: "e2", Supersedes: "e1"}
	c, err := s.Supersede()
	if err != nil || c.Raise.Supersedes != "e1" || c.GraceGiven || !c.Raise.DueAt.IsZero() {
		t.Errorf("supersede: %+v, %v", c, err)
	}
	w := ExpectWithdraw{Reason: "r"}
	if got := w.Command("e1"); got != (expect.WithdrawCommand{ExpectationID: "e1", Reason: "r"}) {
		t.Errorf("withdraw: %+v", got)
	}
	o := ExpectTaskOutcome{Outcome: "failed"}
	if got := o.Command("t1"); got != (expect.TaskOutcomeCommand{TaskID: "t1", Outcome: expect.OutcomeFailed}) {
		t.Errorf("outcome: %+v", got)
	}
}

// A raise read at a clock (the CLI's, MCP's) takes durations where an
// instant or ISO 8601 stands, and Absolute writes them as a REST body and
// a replica read them; without the clock, a short duration is refused.
func TestExpectRaiseRelative(t *testing.T) {
	at := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	d := ExpectRaise{DueAt: "2h", Horizon: "P1D", Grace: "90m", Anchor: &AnchorRef{ExpectationID: "e0", Offset: "1d"}, RelativeTo: at}
	abs, err := d.Absolute()
	if err != nil {
		t.Fatal(err)
	}
	if abs.DueAt != "2026-09-01T19:00:00Z" || abs.Horizon != "2026-09-02T17:00:00Z" || abs.Grace != "PT1H30M" || abs.Anchor.Offset != "PT24H" ||
		!abs.RelativeTo.IsZero() || d.Anchor.Offset != "1d" {
		t.Fatalf("absolute: %+v (anchor %+v)", abs, abs.Anchor)
	}
	d.Subject, d.Kind, d.Basis, d.SatisfiedBy = &expect.Subject{Type: "t", ID: "i"}, "k", "declared", &FactKeyRef{FactKey: "f"}
	r, err := d.Raise()
	if err != nil || r.Grace != 90*time.Minute || r.Anchor.Offset != 24*time.Hour || !r.DueAt.Equal(at.Add(2*time.Hour)) {
		t.Fatalf("raise at a clock: %+v %v", r, err)
	}
	d.RelativeTo, d.DueAt, d.Horizon = time.Time{}, "2026-09-01T19:00:00Z", ""
	if _, err := d.Raise(); err == nil || !strings.HasPrefix(err.Error(), "grace: ") {
		t.Fatalf("a short duration without a clock: %v", err)
	}
}
