package expect

import (
	"tally/instant"
	"tally/jsonline"
)

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
