package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"tally/api"
	"tally/expect"
	"tally/instant"
)

// writeExpectDoc writes one --json document: schema_version, then the
// name/value pairs in order, each value encoded by encoding/json.
func writeExpectDoc(w io.Writer, pairs ...any) error {
	var b bytes.Buffer
	b.WriteString(`{"schema_version":`)
	b.WriteString(strconv.Itoa(SchemaVersion))
	for i := 0; i+1 < len(pairs); i += 2 {
		name, _ := json.Marshal(pairs[i].(string))
		v, err := json.Marshal(pairs[i+1])
		if err != nil {
			return err
		}
		b.WriteByte(',')
		b.Write(name)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteString("}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// parseExpectDuration reads a grace or an offset: ISO 8601 (PT6H, P1DT2H)
// or the short form (6h, 1h45m, 2d, 1w), through the one shared parser.
func parseExpectDuration(field, v string) (time.Duration, error) {
	return instant.ParseDuration(field, v)
}

// parseExpectTime reads an instant: RFC 3339, or a duration counting
// forward from now.
func parseExpectTime(field, v string, now time.Time) (time.Time, error) {
	return instant.Deadline(field, v, now)
}

// parseSince reads a lower bound: RFC 3339, or a duration back from now
// (--since 1h is the last hour).
func parseSince(field, v string, now time.Time) (time.Time, error) {
	return instant.Since(field, v, now)
}

// parseSubject reads TYPE:ID.
func parseSubject(field, v string) (expect.Subject, error) {
	t, id, ok := strings.Cut(v, ":")
	if !ok || t == "" || id == "" {
		return expect.Subject{}, usagef("%s: %q must be TYPE:ID (shipment:PA-2026-0901)", field, v)
	}
	return expect.Subject{Type: t, ID: id}, nil
}

// raiseInput is an expectation as the CLI takes it (flags or one JSON
// document), before its times and durations are read.
type raiseInput struct {
	id, kind, subject, expects, factKey string
	due, grace, anchor, horizon, basis  string
	task, context, supersedes           string
	producer                            string
	after                               []string
	afterSet                            bool
}

// readRaiseDoc reads one api.ExpectRaise from in into r.
func readRaiseDoc(in io.Reader, r *raiseInput) error {
	b, err := io.ReadAll(io.LimitReader(in, 1<<20))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return usagef("stdin: give one JSON expectation")
	}
	var d api.ExpectRaise // the draft's document, as the HTTP API takes it
	if err := api.Decode("stdin", b, &d); err != nil {
		return err
	}
	r.id, r.kind, r.expects, r.due, r.grace = d.ExpectationID, d.Kind, d.Expects, d.DueAt, d.Grace
	r.horizon, r.basis, r.supersedes, r.producer = d.Horizon, d.Basis, d.Supersedes, d.Producer
	if d.Subject != nil {
		r.subject = d.Subject.Type + ":" + d.Subject.ID
	}
	if d.SatisfiedBy != nil {
		r.factKey = d.SatisfiedBy.FactKey
	}
	if d.Anchor != nil {
		r.anchor = d.Anchor.ExpectationID + ":" + d.Anchor.Offset
	}
	if d.After != nil {
		r.after, r.afterSet = d.After, true
	}
	if d.Origin != nil {
		r.task, r.context = d.Origin.TaskID, d.Origin.ContextID
	}
	return nil
}

// doc converts the input to the document it asks for, its flags checked
// here in the CLI's words: a time as given (a duration from now stays one,
// read at now, so a retry under the same request id asks the same), a
// duration in ISO 8601. An extension (supersede) leaves out the terms it
// is not given, for the expect core to inherit; an id not given is minted
// by the service.
func (in *raiseInput) doc(now time.Time, extend bool) (api.ExpectRaise, error) {
	d := api.ExpectRaise{
		ExpectationID: in.id, Kind: in.kind, Expects: in.expects, After: in.after, Basis: in.basis,
		DueAt: in.due, Horizon: in.horizon, RelativeTo: now, Producer: in.producer,
	}
	if in.factKey != "" {
		d.SatisfiedBy = &api.FactKeyRef{FactKey: in.factKey}
	}
	if in.task != "" || in.context != "" {
		d.Origin = &expect.Origin{TaskID: in.task, ContextID: in.context}
	}
	if in.subject == "" && !extend {
		return d, usagef("subject: required (--subject TYPE:ID)")
	}
	if in.subject != "" {
		s, err := parseSubject("subject", in.subject)
		if err != nil {
			return d, err
		}
		d.Subject = &s
	}
	if in.due == "" && !extend {
		return d, usagef("due: required (--due RFC 3339 or a duration from now): there is no open-ended expectation")
	}
	if in.due != "" {
		if _, err := parseExpectTime("due", in.due, now); err != nil {
			return d, err
		}
	}
	if in.grace != "" {
		g, err := parseExpectDuration("grace", in.grace)
		if err != nil {
			return d, err
		}
		d.Grace = expect.FormatDuration(g)
	}
	if in.horizon != "" {
		if _, err := parseExpectTime("horizon", in.horizon, now); err != nil {
			return d, err
		}
	}
	if in.anchor != "" {
		i := strings.LastIndex(in.anchor, ":")
		if i <= 0 || i == len(in.anchor)-1 {
			return d, usagef("anchor: %q must be ID:OFFSET (exp-depart:1h45m)", in.anchor)
		}
		off, err := parseExpectDuration("anchor", in.anchor[i+1:])
		if err != nil {
			return d, err
		}
		d.Anchor = &api.AnchorRef{ExpectationID: in.anchor[:i], Offset: expect.FormatDuration(off)}
	}
	return d, nil
}
