package promise

import (
	"slices"

	"strconv"
	"time"

	"tally/duequeue"
	"tally/instant"
	"tally/jsonline"
)

// View is a promise as `show --json` and `ls --json` print it. The shape is
// part of tally's stable output (schema_version 1): fields are added, never
// renamed or removed.
type View struct {
	ID          string
	Promise     string
	By, To      string
	On, Task    string // "" prints as null
	Until       time.Time
	Horizons    []time.Time
	State       Status
	Overdue     bool
	Evidence    []string
	Reason      string // "" prints as null
	ResolvedBy  string
	ResolvedAt  time.Time
	Assessments []AssessmentView
	Declared    time.Time
	Meta        string // raw JSON object; "" prints as null
	Seq         uint64
}

// AssessmentView is one observer's judgment as printed.
type AssessmentView struct {
	Observer, State, Note string
	TS                    time.Time
}

// View computes the printed form of p at now.
func (s *State) View(p *Promise, now time.Time) View {
	v := View{
		ID: p.ID, Promise: p.Text, By: p.By, To: p.To, On: p.On, Task: p.Task,
		Until: p.Until(), State: s.Status(p), Meta: p.Meta, Seq: p.Seq,
		Declared: instant.Unpack(p.Declared),
	}
	v.Overdue = v.State == Owed && instant.Pack(now) > p.Horizons[len(p.Horizons)-1]
	v.Horizons = make([]time.Time, len(p.Horizons))
	for i, h := range p.Horizons {
		v.Horizons[i] = instant.Unpack(h)
	}
	if r := p.Resolution; r != nil {
		v.Evidence, v.Reason, v.ResolvedBy = r.Evidence, r.Reason, r.By
		v.ResolvedAt = instant.Unpack(r.At)
	}
	for _, a := range p.Assessments {
		v.Assessments = append(v.Assessments, AssessmentView{Observer: a.Observer, State: a.State, Note: a.Note, TS: instant.Unpack(a.At)})
	}
	return v
}

// AppendJSON writes the view as one JSON object with a fixed member order,
// so output is byte-identical for the same log and now.
func (v *View) AppendJSON(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = jsonline.AppendString(b, v.ID)
	b = append(b, `,"promise":`...)
	b = jsonline.AppendString(b, v.Promise)
	b = append(b, `,"by":`...)
	b = jsonline.AppendString(b, v.By)
	b = append(b, `,"to":`...)
	b = jsonline.AppendString(b, v.To)
	b = append(b, `,"on":`...)
	b = appendOptString(b, v.On)
	b = append(b, `,"task":`...)
	b = appendOptString(b, v.Task)
	b = append(b, `,"until":`...)
	b = instant.AppendQuoted(b, v.Until)
	b = append(b, `,"horizons":[`...)
	for i, h := range v.Horizons {
		if i > 0 {
			b = append(b, ',')
		}
		b = instant.AppendQuoted(b, h)
	}
	b = append(b, `],"state":`...)
	b = jsonline.AppendString(b, string(v.State))
	b = append(b, `,"overdue":`...)
	b = strconv.AppendBool(b, v.Overdue)
	b = append(b, `,"evidence":`...)
	if v.Evidence == nil {
		b = append(b, "[]"...)
	} else {
		b = jsonline.AppendStrings(b, v.Evidence)
	}
	b = append(b, `,"reason":`...)
	b = appendOptString(b, v.Reason)
	b = append(b, `,"resolved_by":`...)
	b = appendOptString(b, v.ResolvedBy)
	b = append(b, `,"resolved_at":`...)
	if v.ResolvedAt.IsZero() || v.ResolvedBy == "" {
		b = append(b, "null"...)
	} else {
		b = instant.AppendQuoted(b, v.ResolvedAt)
	}
	b = append(b, `,"assessments":[`...)
	for i, a := range v.Assessments {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"observer":`...)
		b = jsonline.AppendString(b, a.Observer)
		b = append(b, `,"state":`...)
		b = jsonline.AppendString(b, a.State)
		b = append(b, `,"note":`...)
		b = appendOptString(b, a.Note)
		b = append(b, `,"ts":`...)
		b = instant.AppendQuoted(b, a.TS)
		b = append(b, '}')
	}
	b = append(b, `],"declared":`...)
	b = instant.AppendQuoted(b, v.Declared)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, v.Seq, 10)
	b = append(b, `,"meta":`...)
	if v.Meta == "" {
		b = append(b, "null"...)
	} else {
		b = append(b, v.Meta...)
	}
	return append(b, '}')
}

func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonline.AppendString(b, s)
}

// Filter selects promises for listing. State is "open" (conditional and
// owed; the default), "overdue" or "all"; By and To match exactly when set.
// Task, when set, keeps the promises whose task field or id is Task: an A2A
// task id names a promise by either, so its binding picks among these.
type Filter struct {
	State  string // FilterOpen, FilterOverdue or FilterAll
	By, To string
	Task   string
}

// The selections of Filter.State ("" is FilterOpen).
const (
	FilterOpen    = "open"
	FilterOverdue = "overdue"
	FilterAll     = "all"
)

// Select returns the views of the promises f selects at now, in declaration
// order. Views are built only for selected promises.
//
// An "overdue" selection scans the promises the first time; from the second
// one on (a long-lived state, such as the server's) it uses a deadline index
// of the unresolved promises, so it costs O(k log n) for the k promises past
// their deadline rather than O(n).
func (s *State) Select(f Filter, now time.Time) []View {
	var out []View
	keep := func(p *Promise) bool {
		if (f.By != "" && p.By != f.By) || (f.To != "" && p.To != f.To) {
			return false
		}
		if f.Task != "" && p.Task != f.Task && p.ID != f.Task {
			return false
		}
		switch f.State {
		case FilterAll:
			return true
		case FilterOverdue:
			return s.Overdue(p, now)
		default:
			return s.Status(p).Open()
		}
	}
	if f.State == FilterOverdue {
		s.overdueQueries++
		if s.overdueQueries > 1 {
			s.ensureDeadlines()
			var hits []int32
			s.deadlines.Due(now, func(pos int32, _ time.Time) bool {
				hits = append(hits, pos)
				return true
			})
			slices.Sort(hits)
			for _, pos := range hits {
				if p := s.order[pos]; keep(p) {
					out = append(out, s.View(p, now))
				}
			}
			return out
		}
	}
	// The positions first, then the views in one allocation: a View is a
	// few hundred bytes, and growing the slice view by view copied 10,000
	// of them about twice over.
	var kept []int32
	for i, p := range s.order {
		if keep(p) {
			kept = append(kept, int32(i))
		}
	}
	if len(kept) == 0 {
		return nil
	}
	out = make([]View, len(kept))
	for i, pos := range kept {
		out[i] = s.View(s.order[pos], now)
	}
	return out
}

// ensureDeadlines builds the deadline index of unresolved promises; Apply
// keeps it current from then on.
func (s *State) ensureDeadlines() {
	if s.deadlines != nil {
		return
	}
	s.deadlines = duequeue.New(func(a, b int32) bool { return a < b })
	for i, p := range s.order {
		if p.Resolution == nil {
			s.deadlines.Set(int32(i), p.Until())
		}
	}
}
