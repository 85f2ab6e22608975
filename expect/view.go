package expect

import (
	"slices"
	"time"
)

// View is one expectation as `tally expect show --json` prints it. Times
// are RFC 3339 UTC.
type View struct {
	ExpectationID string      `json:"expectationId"`
	State         string      `json:"state"` // open | satisfied | withdrawn | superseded
	Kind          string      `json:"kind"`
	Subject       Subject     `json:"subject"`
	Expects       string      `json:"expects,omitempty"`
	SatisfiedBy   SatisfiedBy `json:"satisfiedBy"`
	Basis         Basis       `json:"basis"`
	By            string      `json:"by"`
	// Producer is the seat expected to produce the satisfying fact, when
	// the raiser named one.
	Producer string  `json:"producer,omitempty"`
	Human    bool    `json:"human,omitempty"`
	Origin   *Origin `json:"origin,omitempty"`
	// ReplyTo is where lapses go over A2A; a push token is never shown
	// (PushToken is "set" when there is one).
	ReplyTo  *ReplyTo  `json:"replyTo,omitempty"`
	RaisedAt time.Time `json:"raisedAt"`

	// ProjectedDue is the due time as raised (the original plan);
	// CurrentDue is the one in force (moved by re-anchoring); ActualAt is
	// when the satisfying fact happened.
	ProjectedDue time.Time  `json:"projectedDue"`
	CurrentDue   time.Time  `json:"currentDue"`
	ActualAt     *time.Time `json:"actualAt,omitempty"`
	// ReanchoredAt is the anchor's actual time that moved CurrentDue.
	ReanchoredAt *time.Time `json:"reanchoredAt,omitempty"`

	Grace   string      `json:"grace,omitempty"` // ISO 8601
	Anchor  *AnchorView `json:"anchor,omitempty"`
	After   []string    `json:"after,omitempty"`
	Horizon *time.Time  `json:"horizon,omitempty"`

	Withdrawn    *WithdrawnView `json:"withdrawn,omitempty"`
	Supersedes   string         `json:"supersedes,omitempty"`
	SupersededBy string         `json:"supersededBy,omitempty"`
	// Lineage is every expectation of this one's lineage, oldest first,
	// from the first raised to the newest extension.
	Lineage []string `json:"lineage"`
	// Lapses are the lapses recorded on this expectation, in log order.
	Lapses []LapseView `json:"lapses"`
	// DuePassed is a view at the read's instant, set by the reader and
	// never recorded: open, past its due and grace, and no overdue lapse
	// recorded for that due yet (PastDue), so that a reader without a
	// running timekeeper still sees it.
	DuePassed bool `json:"duePassed,omitempty"`
}

// SatisfiedBy is the view's "satisfiedBy" object.
type SatisfiedBy struct {
	FactKey string `json:"factKey"`
}

// AnchorView is the view's "anchor" object.
type AnchorView struct {
	ExpectationID string `json:"expectationId"`
	Offset        string `json:"offset"` // ISO 8601
}

// WithdrawnView says when, by whom and why an expectation was withdrawn.
type WithdrawnView struct {
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
}

// LapseView is one recorded lapse, as `tally lapses --json` prints it.
type LapseView struct {
	LapseID       string    `json:"lapseId"`
	ExpectationID string    `json:"expectationId"`
	Lapse         LapseKind `json:"lapse"`
	DueAt         time.Time `json:"dueAt"`     // the due time in force
	LapsedAt      time.Time `json:"lapsedAt"`  // when the lapse condition became true
	NoticedAt     time.Time `json:"noticedAt"` // when the timekeeper recorded it
	By            string    `json:"by"`
	Seq           uint64    `json:"seq,omitempty"`
}

// DueBy is when an open expectation lapses overdue: its current due plus
// its grace.
func (v *View) DueBy() time.Time {
	g, err := ParseDuration(v.Grace)
	if v.Grace == "" || err != nil {
		return v.CurrentDue
	}
	return v.CurrentDue.Add(g)
}

// PastDue reports whether an open expectation is past its due and grace at
// now with no overdue lapse recorded for that due yet: a view, as overdue
// is for promises, which records nothing (the timekeeper commits the
// lapse when it next sweeps).
func (v *View) PastDue(now time.Time) bool {
	if v.State != "open" || !now.After(v.DueBy()) {
		return false
	}
	for _, l := range v.Lapses {
		if l.Lapse == LapseOverdue && l.DueAt.Equal(v.CurrentDue) {
			return false
		}
	}
	return true
}

// Expectation returns the view of one expectation.
func (s *State) Expectation(id string) (View, bool) {
	x := s.byID[id]
	if x == nil {
		return View{}, false
	}
	return s.view(x), true
}

// Filter selects expectations for List; zero fields match everything.
type Filter struct {
	State     string // open | satisfied | withdrawn | superseded
	Kind      string
	Subject   Subject // both fields or neither
	TaskID    string  // origin task
	ContextID string  // origin context
}

// List returns the expectations matching f, in the order they were raised.
func (s *State) List(f Filter) []View {
	var xs []*expectation
	for _, x := range s.byID {
		if s.matches(x, f) {
			xs = append(xs, x)
		}
	}
	slices.SortFunc(xs, func(a, b *expectation) int { return cmpOrder(a.order, b.order) })
	out := make([]View, 0, len(xs))
	for _, x := range xs {
		out = append(out, s.view(x))
	}
	return out
}

func (s *State) matches(x *expectation, f Filter) bool {
	return (f.State == "" || f.State == x.life.String()) &&
		(f.Kind == "" || f.Kind == s.name(x.kind)) &&
		(f.Subject == (Subject{}) || f.Subject == s.subject(x)) &&
		(f.TaskID == "" || f.TaskID == x.field(tTask)) &&
		(f.ContextID == "" || f.ContextID == x.field(tContext))
}

// Lapses returns every recorded lapse noticed at or after since (zero:
// all), in log order.
func (s *State) Lapses(since time.Time) []LapseView {
	var out []LapseView
	for i, x := range s.lapse {
		l := x.extra.lapses[s.lapsi[i]]
		if !since.IsZero() && fromNanos(l.noticed).Before(since) {
			continue
		}
		out = append(out, lapseView(x, l))
	}
	return out
}

// Len returns how many expectations were raised.
func (s *State) Len() int { return len(s.byID) }

// ReplyTo returns where an expectation's lapses go over A2A, push token
// included; false when it was raised without one.
func (s *State) ReplyTo(expectationID string) (ReplyTo, bool) {
	x := s.byID[expectationID]
	if x == nil || x.extra == nil || x.extra.replyTo == nil {
		return ReplyTo{}, false
	}
	return *x.extra.replyTo, true
}

// TaskOutcome returns the recorded outcome of an origin task.
func (s *State) TaskOutcome(taskID string) (Outcome, bool) {
	o, ok := s.tasks[taskID]
	return o, ok
}

func lapseView(x *expectation, l recordedLapse) LapseView {
	return LapseView{
		LapseID: l.id, ExpectationID: x.id(), Lapse: l.kind,
		DueAt: fromNanos(l.due), LapsedAt: fromNanos(l.lapsedAt), NoticedAt: fromNanos(l.noticed),
		By: l.by, Seq: l.seq,
	}
}

func timePtr(n int64) *time.Time {
	if n == 0 {
		return nil
	}
	t := fromNanos(n)
	return &t
}

func (s *State) view(x *expectation) View {
	r := s.raiseOf(x)
	v := View{
		ExpectationID: r.ExpectationID,
		State:         x.life.String(),
		Kind:          r.Kind,
		Subject:       r.Subject,
		Expects:       r.Expects,
		SatisfiedBy:   SatisfiedBy{FactKey: r.FactKey},
		Basis:         r.Basis,
		By:            r.By,
		Producer:      r.Producer,
		Human:         r.Human,
		RaisedAt:      fromNanos(x.raisedAt),
		ProjectedDue:  fromNanos(x.projectedDue),
		CurrentDue:    fromNanos(x.currentDue),
		After:         slices.Clone(r.After),
		Horizon:       timePtr(x.horizon),
		Supersedes:    r.Supersedes,
		Lapses:        []LapseView{},
	}
	if r.Origin != (Origin{}) {
		o := r.Origin
		v.Origin = &o
	}
	if r.ReplyTo != nil {
		rt := *r.ReplyTo
		if rt.PushToken != "" {
			rt.PushToken = "set"
		}
		if rt.PushAuthCredentials != "" {
			rt.PushAuthCredentials = "set"
		}
		v.ReplyTo = &rt
	}
	if x.life == Satisfied {
		v.ActualAt = timePtr(x.satisfiedAt)
	}
	if r.Grace != 0 {
		v.Grace = FormatDuration(r.Grace)
	}
	if r.Anchor != nil {
		v.Anchor = &AnchorView{ExpectationID: r.Anchor.ExpectationID, Offset: FormatDuration(r.Anchor.Offset)}
	}
	if e := x.extra; e != nil {
		if x.flags&flagReanchored != 0 {
			v.ReanchoredAt = timePtr(e.reanchoredAt)
		}
		if x.life == Withdrawn {
			v.Withdrawn = &WithdrawnView{At: fromNanos(e.closedAt), By: e.closedBy, Reason: e.withdrawReason}
		}
		if e.child != nil {
			v.SupersededBy = e.child.id()
		}
		for _, l := range e.lapses {
			v.Lapses = append(v.Lapses, lapseView(x, l))
		}
	}
	root := x
	for root.parent() != nil {
		root = root.parent()
	}
	for a := root; a != nil; a = a.child() {
		v.Lineage = append(v.Lineage, a.id())
	}
	return v
}
