package expect

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"tally/instant"
	"tally/refuse"
	"tally/textcheck"
)

// Command is a request to change the ledger: one of RaiseCommand,
// SupersedeCommand, FactCommand, WithdrawCommand, TaskOutcomeCommand and
// LapseCommand.
type Command interface{ command() }

// RaiseCommand raises a new expectation. By, when given, must be the actor
// (who raises it), and is the actor when not; Human is taken from the
// actor; Supersedes must be empty (use SupersedeCommand).
type RaiseCommand struct{ Raise Raise }

// SupersedeCommand raises an expectation that extends Raise.Supersedes: the
// only way an expectation gets more time. The terms Raise leaves empty are
// inherited from the expectation it extends, by the rule inherit states, so
// every mode (CLI, REST, A2A) extends alike.
type SupersedeCommand struct {
	Raise Raise
	// GraceGiven says a zero Raise.Grace was stated (no grace is a term
	// too); otherwise a zero grace is inherited.
	GraceGiven bool
}

// FactCommand records that FactKey was observed on Subject at At (zero: now).
type FactCommand struct {
	FactKey string
	Subject Subject
	At      time.Time
}

// WithdrawCommand withdraws an open expectation.
type WithdrawCommand struct {
	ExpectationID string
	Reason        string
}

// TaskOutcomeCommand records an origin task's terminal outcome; cancelled
// and failed withdraw every open expectation raised on the task.
type TaskOutcomeCommand struct {
	TaskID  string
	Outcome Outcome
}

// LapseCommand commits a lapse the timekeeper noticed. DueAt zero means the
// due time now in force.
type LapseCommand struct {
	ExpectationID string
	Kind          LapseKind
	DueAt         time.Time
}

func (RaiseCommand) command()       {}
func (SupersedeCommand) command()   {}
func (FactCommand) command()        {}
func (WithdrawCommand) command()    {}
func (TaskOutcomeCommand) command() {}
func (LapseCommand) command()       {}

// Decide validates cmd against the state as of now and returns the records
// to append, each stamped ts = now, or a *refuse.Refusal and nothing. actor is
// the authenticated identity; human says the actor is a person. Decide never
// changes the state: the caller appends the records, then applies them.
// A lapse that is already recorded returns no records and no error.
func (s *State) Decide(actor string, human bool, now time.Time, cmd Command) ([]Event, error) {
	if actor == "" {
		return nil, refuse.Forbiddenf("actor", "a command needs an authenticated actor")
	}
	if now.IsZero() || !inRange(now) {
		return nil, refuse.Invalidf("ts", "now "+timeProblem(now))
	}
	now = now.UTC()
	var out []Event
	var err *refuse.Refusal
	switch c := cmd.(type) {
	case RaiseCommand:
		out, err = s.decideRaise(actor, human, now, c.Raise, false)
	case *RaiseCommand:
		out, err = s.decideRaise(actor, human, now, c.Raise, false)
	case SupersedeCommand:
		out, err = s.decideSupersede(actor, human, now, c)
	case *SupersedeCommand:
		out, err = s.decideSupersede(actor, human, now, *c)
	case FactCommand:
		out, err = s.decideFact(actor, now, c)
	case *FactCommand:
		out, err = s.decideFact(actor, now, *c)
	case WithdrawCommand:
		out, err = s.decideWithdraw(actor, human, now, c)
	case *WithdrawCommand:
		out, err = s.decideWithdraw(actor, human, now, *c)
	case TaskOutcomeCommand:
		out, err = s.decideTaskOutcome(actor, now, c)
	case *TaskOutcomeCommand:
		out, err = s.decideTaskOutcome(actor, now, *c)
	case LapseCommand:
		out, err = s.decideLapse(actor, now, c)
	case *LapseCommand:
		out, err = s.decideLapse(actor, now, *c)
	default:
		return nil, refuse.Invalidf("command", fmt.Sprintf("unknown command %T", cmd))
	}
	if err != nil {
		return nil, err
	}
	for i := range out {
		if werr := out[i].wellFormed(); werr != nil {
			panic("expect: Decide produced a malformed record: " + werr.Error())
		}
	}
	return out, nil
}

func refusal(code, field, rule_ string) *refuse.Refusal {
	return refuse.New(refuse.Code(code), field, rule_)
}

// text checks a free-text or key field's length and encoding.
func (s *State) text(field, v string, required bool) *refuse.Refusal {
	switch {
	case required && v == "":
		return refuse.Invalidf(field, "required")
	case len(v) > s.cfg.TextMax:
		return refuse.Invalidf(field, fmt.Sprintf("must be at most %d bytes", s.cfg.TextMax))
	case !utf8.ValidString(v):
		return refuse.Invalidf(field, "must be valid UTF-8")
	case textcheck.TextFault(v) != "":
		return refuse.Invalidf(field, textcheck.TextFault(v))
	}
	return nil
}

// identifiers refuses what textcheck.IdentifierFault finds in the named
// identifiers of a command (only at decide: old records still fold).
func identifiers(ids ...string) *refuse.Refusal {
	for i := 0; i+1 < len(ids); i += 2 {
		if f := textcheck.IdentifierFault(ids[i+1]); f != "" {
			return refuse.Invalidf(ids[i], f)
		}
	}
	return nil
}

// decideSupersede fills the extension's terms from the expectation it
// extends, then decides it as a raise.
func (s *State) decideSupersede(actor string, human bool, now time.Time, c SupersedeCommand) ([]Event, *refuse.Refusal) {
	if err := s.inherit(&c.Raise, c.GraceGiven, now); err != nil {
		return nil, err
	}
	return s.decideRaise(actor, human, now, c.Raise, true)
}

// inherit fills the terms r leaves empty from the expectation it extends.
// Two terms follow the new plan rather than the old one: an anchor is
// inherited only with the inherited dueAt, because a re-anchored due would
// replace the dueAt given (an anchor stated is kept); and an inherited
// horizon that has passed is refused, because the extension would stall at
// once and give no more time.
func (s *State) inherit(r *Raise, graceGiven bool, now time.Time) *refuse.Refusal {
	x := s.byID[r.Supersedes]
	if x == nil {
		return nil // raiseProblem names it
	}
	old := s.raiseOf(x)
	for _, f := range []struct {
		dst *string
		src string
	}{
		{&r.Kind, old.Kind}, {&r.Expects, old.Expects}, {&r.FactKey, old.FactKey}, {(*string)(&r.Basis), string(old.Basis)},
	} {
		if *f.dst == "" {
			*f.dst = f.src
		}
	}
	if r.Subject == (Subject{}) {
		r.Subject = old.Subject
	}
	if r.Producer == "" {
		r.Producer = old.Producer
	}
	dueGiven := !r.DueAt.IsZero()
	if !dueGiven {
		r.DueAt = old.DueAt
	}
	if r.Grace == 0 && !graceGiven {
		r.Grace = old.Grace
	}
	if r.Anchor == nil && old.Anchor != nil && !dueGiven {
		a := *old.Anchor
		r.Anchor = &a
	}
	if r.After == nil {
		r.After = slices.Clone(old.After)
	}
	if r.Horizon.IsZero() && !old.Horizon.IsZero() {
		if !old.Horizon.After(now) {
			return refuse.Invalidf("horizon", fmt.Sprintf("inherited from %s, %s has passed, so the extension would stall at once: pass a later horizon (--horizon)",
				x.id(), instant.Format(old.Horizon)))
		}
		r.Horizon = old.Horizon
	}
	if r.Origin == (Origin{}) {
		r.Origin = old.Origin
	}
	if r.ReplyTo == nil {
		r.ReplyTo = old.ReplyTo
	}
	return nil
}

func (s *State) decideRaise(actor string, human bool, now time.Time, r Raise, extend bool) ([]Event, *refuse.Refusal) {
	if r.By != "" && r.By != actor {
		return nil, refuse.Forbiddenf("by", "an expectation is raised by the acting identity "+actor+", not "+r.By)
	}
	r.By, r.Human = actor, human
	r.After = slices.Clone(r.After)
	if r.Anchor != nil {
		a := *r.Anchor
		r.Anchor = &a
	}
	r.DueAt, r.Horizon = r.DueAt.UTC(), r.Horizon.UTC()
	if r.DueAt.IsZero() {
		return nil, refuse.Invalidf("dueAt", "required: there is no open-ended expectation")
	}
	if r.Basis == "" {
		return nil, refuse.Invalidf("basis", "required: observed, contract or declared, truthfully")
	}
	if !r.Basis.valid() {
		return nil, refuse.Invalidf("basis", "must be observed, contract or declared")
	}
	if !extend && r.Supersedes != "" {
		return nil, refuse.Invalidf("supersedes", "an extension is raised with supersede")
	}
	if extend && r.Supersedes == "" {
		return nil, refuse.Invalidf("supersedes", "required: the expectation this one extends")
	}
	for _, f := range []struct {
		name, value string
		required    bool
	}{
		{"expectationId", r.ExpectationID, true},
		{"kind", r.Kind, true},
		{"subject.type", r.Subject.Type, true},
		{"subject.id", r.Subject.ID, true},
		{"satisfiedBy.factKey", r.FactKey, true},
		{"expects", r.Expects, false},
		{"by", r.By, true},
	} {
		if err := s.text(f.name, f.value, f.required); err != nil {
			return nil, err
		}
	}
	if len(r.After) > s.cfg.AfterMax {
		return nil, refuse.Invalidf("after", fmt.Sprintf("names %d expectations, at most %d", len(r.After), s.cfg.AfterMax))
	}
	if r.Origin.ContextID != "" && r.Origin.TaskID == "" {
		return nil, refuse.Invalidf("origin.taskId", "required with origin.contextId")
	}
	for _, id := range []struct{ name, value string }{{"origin.taskId", r.Origin.TaskID}, {"origin.contextId", r.Origin.ContextID}} {
		if id.value != "" && !validID(id.value) {
			return nil, refuse.Invalidf(id.name, fmt.Sprintf("must be 1..%d characters without whitespace", IDMax))
		}
	}
	if r.ReplyTo != nil {
		if field, why := r.ReplyTo.problem(); field != "" {
			return nil, refuse.Invalidf(field, why)
		}
		rt := *r.ReplyTo
		r.ReplyTo = &rt
	}
	if r.Anchor != nil && !validID(r.Anchor.ExpectationID) {
		return nil, refuse.Invalidf("anchor.expectationId", "required with anchor")
	}
	if err := identifiers("expectationId", r.ExpectationID, "kind", r.Kind, "subject.type", r.Subject.Type, "subject.id", r.Subject.ID,
		"satisfiedBy.factKey", r.FactKey, "supersedes", r.Supersedes, "origin.taskId", r.Origin.TaskID, "origin.contextId", r.Origin.ContextID); err != nil {
		return nil, err
	}
	for _, id := range r.After {
		if err := identifiers("after", id); err != nil {
			return nil, err
		}
	}
	if extend {
		prev := s.byID[r.Supersedes]
		if prev != nil {
			if actor != s.name(prev.by) && !human {
				return nil, refuse.Forbiddenf("supersedes", "only its raiser or a person may extend "+prev.id())
			}
		}
	}
	if code, field, why := s.raiseProblem(&r); code != "" {
		return nil, refusal(code, field, why)
	}
	if extend {
		if d := depth(s.byID[r.Supersedes]) + 1; d > s.cfg.LineageMax && !human {
			return nil, refuse.Forbiddenf("supersedes", fmt.Sprintf(
				"lineage bound %d reached: past it only a person may give more time", s.cfg.LineageMax))
		}
	}
	if task := r.Origin.TaskID; task != "" && s.tasks[task].withdraws() {
		return nil, refuse.Conflictf("origin.taskId", "task "+task+" was "+string(s.tasks[task])+": nothing may be expected on it")
	}
	return []Event{{TS: now, Type: TypeRaise, Raise: &r}}, nil
}

func (s *State) decideFact(actor string, now time.Time, c FactCommand) ([]Event, *refuse.Refusal) {
	for _, f := range []struct{ name, value string }{
		{"factKey", c.FactKey}, {"subject.type", c.Subject.Type}, {"subject.id", c.Subject.ID}, {"by", actor},
	} {
		if err := s.text(f.name, f.value, true); err != nil {
			return nil, err
		}
	}
	if err := identifiers("factKey", c.FactKey, "subject.type", c.Subject.Type, "subject.id", c.Subject.ID); err != nil {
		return nil, err
	}
	at := c.At.UTC()
	if c.At.IsZero() {
		at = now
	}
	if at.After(now) {
		return nil, refuse.Invalidf("at", "must not be in the future: a fact is observed, not expected")
	}
	if !inRange(at) {
		return nil, refuse.Invalidf("at", timeProblem(at))
	}
	return []Event{{TS: now, Type: TypeFact, Fact: &Fact{FactKey: c.FactKey, Subject: c.Subject, At: at, By: actor}}}, nil
}

func (s *State) decideWithdraw(actor string, human bool, now time.Time, c WithdrawCommand) ([]Event, *refuse.Refusal) {
	if err := s.text("reason", c.Reason, false); err != nil {
		return nil, err
	}
	x := s.byID[c.ExpectationID]
	switch {
	case c.ExpectationID == "":
		return nil, refuse.Invalidf("expectationId", "required")
	case x == nil:
		return nil, refuse.NotFoundf("expectationId", "names no expectation in this ledger")
	case x.life != Open:
		return nil, refuse.Conflictf("expectationId", "is "+x.life.String()+": only an open expectation can be withdrawn")
	case actor != s.name(x.by) && actor != s.cfg.Timekeeper && !human:
		return nil, refuse.Forbiddenf("by", "only its raiser, the timekeeper or a person may withdraw "+x.id())
	}
	return []Event{{TS: now, Type: TypeWithdraw, Withdraw: &Withdraw{ExpectationID: x.id(), By: actor, Reason: c.Reason}}}, nil
}

func (s *State) decideTaskOutcome(actor string, now time.Time, c TaskOutcomeCommand) ([]Event, *refuse.Refusal) {
	switch {
	case !validID(c.TaskID):
		return nil, refuse.Invalidf("taskId", fmt.Sprintf("must be 1..%d characters without whitespace", IDMax))
	case identifiers("taskId", c.TaskID) != nil:
		return nil, identifiers("taskId", c.TaskID)
	case !c.Outcome.valid():
		return nil, refuse.Invalidf("outcome", "must be completed, cancelled or failed")
	}
	if prev, ok := s.tasks[c.TaskID]; ok {
		return nil, refuse.Conflictf("taskId", "task "+c.TaskID+" already ended "+string(prev))
	}
	out := []Event{{TS: now, Type: TypeTaskOutcome, TaskOutcome: &TaskOutcome{TaskID: c.TaskID, Outcome: c.Outcome, By: actor}}}
	if c.Outcome.withdraws() {
		out = append(out, s.withdrawals(s.byTaskOpen(c.TaskID), actor, now, "origin task "+string(c.Outcome))...)
	}
	return out, nil
}

// byTaskOpen returns the open expectations raised on task, in raise order.
func (s *State) byTaskOpen(task string) []*expectation {
	var xs []*expectation
	for x := s.byTask[task]; x != nil; x = x.nextSameTask {
		xs = append(xs, x)
	}
	slices.SortFunc(xs, func(a, b *expectation) int { return cmpOrder(a.order, b.order) })
	return xs
}

func cmpOrder(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (s *State) withdrawals(xs []*expectation, by string, now time.Time, reason string) []Event {
	out := make([]Event, 0, len(xs))
	for _, x := range xs {
		out = append(out, Event{TS: now, Type: TypeWithdraw, Withdraw: &Withdraw{ExpectationID: x.id(), By: by, Reason: reason}})
	}
	return out
}

func (s *State) decideLapse(actor string, now time.Time, c LapseCommand) ([]Event, *refuse.Refusal) {
	if actor != s.cfg.Timekeeper {
		return nil, refuse.Forbiddenf("by", "only the timekeeper commits lapses")
	}
	if !c.Kind.valid() {
		return nil, refuse.Invalidf("lapse", "must be overdue, skipped or stalled")
	}
	x := s.byID[c.ExpectationID]
	if x == nil {
		return nil, refuse.NotFoundf("expectationId", "names no expectation in this ledger")
	}
	due := c.DueAt
	if due.IsZero() {
		due = fromNanos(x.currentDue)
	}
	if s.recorded(x, c.Kind, nanos(due)) {
		return nil, nil // recorded already: recording it again is a no-op
	}
	if nanos(due) != x.currentDue {
		return nil, refuse.Conflictf("dueAt", "is not the due time in force ("+instant.Format(fromNanos(x.currentDue))+")")
	}
	for _, c2 := range s.pending(x) {
		if c2.kind != c.Kind || c2.lapsedAt >= nanos(now) {
			continue
		}
		if c2.kind == LapseStalled && s.heard(x) {
			break
		}
		return []Event{s.lapseEvent(x, c2, now)}, nil
	}
	return nil, refuse.Conflictf("lapse", "no "+string(c.Kind)+" lapse of "+x.id()+" is due at "+instant.Format(now))
}

func (s *State) lapseEvent(x *expectation, c candidate, now time.Time) Event {
	due := fromNanos(x.currentDue)
	return Event{TS: now, Type: TypeLapse, Lapse: &Lapse{
		LapseID:       LapseID(x.id(), c.kind, due),
		ExpectationID: x.id(),
		Kind:          c.kind,
		DueAt:         due,
		LapsedAt:      fromNanos(c.lapsedAt),
		By:            s.cfg.Timekeeper,
	}}
}
