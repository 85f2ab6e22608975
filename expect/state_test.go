package expect

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"tally/refuse"
)

var (
	tRaise   = mustTime("2026-09-01T17:00:00Z")
	shipment = Subject{"shipment", "PA-2026-0901"}
)

const (
	depart = "exp-01J8Q0DEPART"
	arrive = "exp-01J8Q0ARRIVE"
	agent  = "agent://booking"
)

// departure and arrival are the draft's example: departure planned 03:15,
// arrival anchored 1h45m after it, grace 6h, horizon two days later.
func departure() Raise {
	return Raise{
		ExpectationID: depart, Kind: "shipment.departure", Subject: shipment,
		Expects: "a departure event at FRA", FactKey: "shipment.departed:PA-2026-0901",
		DueAt: mustTime("2026-09-11T03:15:00Z"), Grace: 6 * time.Hour,
		Horizon: mustTime("2026-09-13T05:00:00Z"), Basis: BasisObserved,
		Origin: Origin{TaskID: "task-7", ContextID: "ctx-3"},
	}
}

func arrival() Raise {
	return Raise{
		ExpectationID: arrive, Kind: "shipment.arrival", Subject: shipment,
		Expects: "an arrival event at DOH", FactKey: "shipment.arrived:PA-2026-0901",
		DueAt: mustTime("2026-09-11T05:00:00Z"), Grace: 6 * time.Hour,
		Anchor: &Anchor{ExpectationID: depart, Offset: time.Hour + 45*time.Minute},
		After:  []string{depart}, Horizon: mustTime("2026-09-13T05:00:00Z"), Basis: BasisObserved,
		Origin: Origin{TaskID: "task-7", ContextID: "ctx-3"},
	}
}

func shipmentHarness(t *testing.T) *harness {
	h := newHarness(t)
	h.do(agent, false, tRaise, RaiseCommand{departure()})
	h.do(agent, false, tRaise, RaiseCommand{arrival()})
	return h
}

func fact(key string, at string) FactCommand {
	return FactCommand{FactKey: key, Subject: shipment, At: mustTime(at)}
}

func expectLapses(t *testing.T, got []Event, want ...string) {
	t.Helper()
	g := lapses(got)
	if fmt.Sprint(g) != fmt.Sprint(want) {
		t.Fatalf("records:\n  %v\nwant:\n  %v", g, want)
	}
}

func TestShipmentLateDepartureReanchorsThenOverdueOnce(t *testing.T) {
	h := shipmentHarness(t)
	h.do("carrier-feed", false, mustTime("2026-09-11T04:10:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-11T04:00:00Z"))

	d := h.view(depart)
	if d.State != "satisfied" || !d.ActualAt.Equal(mustTime("2026-09-11T04:00:00Z")) {
		t.Fatalf("departure: %s", jsonOf(d))
	}
	a := h.view(arrive)
	if a.State != "open" ||
		!a.ProjectedDue.Equal(mustTime("2026-09-11T05:00:00Z")) ||
		!a.CurrentDue.Equal(mustTime("2026-09-11T05:45:00Z")) ||
		a.ActualAt != nil || !a.ReanchoredAt.Equal(mustTime("2026-09-11T04:00:00Z")) {
		t.Fatalf("arrival after a late departure: %s", jsonOf(a))
	}
	if next, _ := h.s.NextDue(); !next.Equal(mustTime("2026-09-11T11:45:00Z")) {
		t.Fatalf("NextDue = %v", next)
	}

	// Due + grace is 11:45; a lapse falls due strictly after it.
	expectLapses(t, h.commit(mustTime("2026-09-11T11:45:00Z")))
	expectLapses(t, h.commit(mustTime("2026-09-11T11:46:00Z")),
		"exp-01J8Q0ARRIVE overdue 2026-09-11T05:45:00Z 2026-09-11T11:45:00Z")
	expectLapses(t, h.commit(mustTime("2026-09-11T11:47:00Z")))
	// The departure fact is a fact on the subject: no stall at the horizon.
	expectLapses(t, h.commit(mustTime("2026-09-20T00:00:00Z")))

	a = h.view(arrive)
	if a.State != "open" || len(a.Lapses) != 1 || a.Lapses[0].Lapse != LapseOverdue ||
		!a.Lapses[0].NoticedAt.Equal(mustTime("2026-09-11T11:46:00Z")) ||
		a.Lapses[0].LapseID != LapseID(arrive, LapseOverdue, mustTime("2026-09-11T05:45:00Z")) {
		t.Fatalf("a lapse never changes the expectation and is recorded once: %s", jsonOf(a))
	}
	// A late arrival still satisfies; the lapse stays in the record.
	h.do("carrier-feed", false, mustTime("2026-09-12T00:00:00Z"), fact("shipment.arrived:PA-2026-0901", "2026-09-11T23:00:00Z"))
	a = h.view(arrive)
	if a.State != "satisfied" || len(a.Lapses) != 1 {
		t.Fatalf("late arrival: %s", jsonOf(a))
	}
}

func TestShipmentArrivalWithoutDepartureIsSkipped(t *testing.T) {
	h := shipmentHarness(t)
	h.do("carrier-feed", false, mustTime("2026-09-11T06:10:00Z"), fact("shipment.arrived:PA-2026-0901", "2026-09-11T06:00:00Z"))
	if v := h.view(arrive); v.State != "satisfied" || !v.CurrentDue.Equal(v.ProjectedDue) {
		t.Fatalf("arrival: %s", jsonOf(v))
	}
	expectLapses(t, h.commit(mustTime("2026-09-11T06:10:00Z")),
		"exp-01J8Q0DEPART skipped 2026-09-11T03:15:00Z 2026-09-11T06:00:00Z")
	// The departure is still open: it also goes overdue at 09:15, once.
	expectLapses(t, h.commit(mustTime("2026-09-11T09:16:00Z")),
		"exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z")
	expectLapses(t, h.commit(mustTime("2026-09-20T00:00:00Z")))
}

func TestShipmentSilenceStallsAndLateWatcherGetsEverythingOnce(t *testing.T) {
	h := shipmentHarness(t)
	// The timekeeper was down from the raise until two days after the horizon.
	expectLapses(t, h.commit(mustTime("2026-09-15T00:00:00Z")),
		"exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z",
		"exp-01J8Q0DEPART stalled 2026-09-11T03:15:00Z 2026-09-13T05:00:00Z",
		"exp-01J8Q0ARRIVE overdue 2026-09-11T05:00:00Z 2026-09-11T11:00:00Z",
		"exp-01J8Q0ARRIVE stalled 2026-09-11T05:00:00Z 2026-09-13T05:00:00Z")
	expectLapses(t, h.commit(mustTime("2026-09-15T00:00:00Z")))
	expectLapses(t, h.commit(mustTime("2026-10-15T00:00:00Z")))
	if got := len(h.s.Lapses(time.Time{})); got != 4 {
		t.Fatalf("Lapses = %d, want 4", got)
	}
	if got := len(h.s.Lapses(mustTime("2026-09-15T00:00:01Z"))); got != 0 {
		t.Fatalf("Lapses(since) = %d, want 0", got)
	}
}

func TestShipmentStalledOnlyWithoutAnyFact(t *testing.T) {
	h := shipmentHarness(t)
	// Any fact on the subject by the horizon rules stalled out, whatever its key.
	h.do("customs", false, mustTime("2026-09-12T00:00:00Z"), fact("shipment.customs-hold:PA-2026-0901", "2026-09-12T00:00:00Z"))
	expectLapses(t, h.commit(mustTime("2026-09-15T00:00:00Z")),
		"exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z",
		"exp-01J8Q0ARRIVE overdue 2026-09-11T05:00:00Z 2026-09-11T11:00:00Z")
	// A fact on another subject does not.
	h2 := shipmentHarness(t)
	h2.do("customs", false, mustTime("2026-09-12T00:00:00Z"), FactCommand{FactKey: "x", Subject: Subject{"shipment", "OTHER"}})
	if n := len(h2.commit(mustTime("2026-09-15T00:00:00Z"))); n != 4 {
		t.Fatalf("lapses = %d, want 4", n)
	}
}

func TestLateSatisfactionDoesNotUndoALapse(t *testing.T) {
	h := shipmentHarness(t)
	// The timekeeper is down; the departure lands after its due + grace.
	h.do("carrier-feed", false, mustTime("2026-09-11T10:00:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-11T10:00:00Z"))
	// In time on the other hand: the arrival at exactly its due + grace.
	h.do("carrier-feed", false, mustTime("2026-09-11T17:45:00Z"), fact("shipment.arrived:PA-2026-0901", "2026-09-11T17:45:00Z"))
	expectLapses(t, h.commit(mustTime("2026-09-15T00:00:00Z")),
		"exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z")
}

func TestReanchorFollowsTheAnchorsLineage(t *testing.T) {
	h := shipmentHarness(t)
	r := departure()
	r.ExpectationID = "exp-DEPART-2"
	r.Supersedes = depart
	r.DueAt = mustTime("2026-09-12T03:15:00Z")
	r.Horizon = mustTime("2026-09-14T05:00:00Z")
	h.do(agent, false, tRaise.Add(time.Hour), SupersedeCommand{Raise: r})
	h.do("carrier-feed", false, mustTime("2026-09-12T04:00:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-12T04:00:00Z"))
	if v := h.view(arrive); !v.CurrentDue.Equal(mustTime("2026-09-12T05:45:00Z")) {
		t.Fatalf("arrival should follow the extended departure: %s", jsonOf(v))
	}
	// A step raised after its anchor landed starts re-anchored.
	late := arrival()
	late.ExpectationID = "exp-ARRIVE-LATE"
	late.FactKey = "other"
	h.do(agent, false, mustTime("2026-09-12T05:00:00Z"), RaiseCommand{late})
	if v := h.view("exp-ARRIVE-LATE"); !v.CurrentDue.Equal(mustTime("2026-09-12T05:45:00Z")) || !v.ProjectedDue.Equal(mustTime("2026-09-11T05:00:00Z")) {
		t.Fatalf("late raise: %s", jsonOf(v))
	}
}

func TestFactBeforeRaiseSatisfies(t *testing.T) {
	h := newHarness(t)
	h.do("feed", false, mustTime("2026-09-01T10:00:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-01T09:00:00Z"))
	h.do(agent, false, tRaise, RaiseCommand{departure()})
	if v := h.view(depart); v.State != "satisfied" || !v.ActualAt.Equal(mustTime("2026-09-01T09:00:00Z")) {
		t.Fatalf("%s", jsonOf(v))
	}
	expectLapses(t, h.commit(mustTime("2026-10-01T00:00:00Z")))
}

func TestWithdrawalOnCancelledOrFailedOrigin(t *testing.T) {
	for _, outcome := range []Outcome{OutcomeCancelled, OutcomeFailed} {
		t.Run(string(outcome), func(t *testing.T) {
			h := shipmentHarness(t)
			other := departure()
			other.ExpectationID, other.FactKey, other.Origin = "exp-OTHER", "k", Origin{TaskID: "task-8"}
			h.do(agent, false, tRaise, RaiseCommand{other})
			evs := h.do(agent, false, mustTime("2026-09-02T08:00:00Z"), TaskOutcomeCommand{TaskID: "task-7", Outcome: outcome})
			if got := fmt.Sprint(lapses(evs)); got != "[exp-01J8Q0DEPART withdrawn by agent://booking exp-01J8Q0ARRIVE withdrawn by agent://booking]" {
				t.Fatalf("records: %s", got)
			}
			for _, id := range []string{depart, arrive} {
				v := h.view(id)
				if v.State != "withdrawn" || v.Withdrawn.Reason != "origin task "+string(outcome) {
					t.Fatalf("%s", jsonOf(v))
				}
			}
			// No lapse afterwards, ever; the other task's expectation still lapses.
			expectLapses(t, h.commit(mustTime("2026-10-01T00:00:00Z")),
				"exp-OTHER overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z",
				"exp-OTHER stalled 2026-09-11T03:15:00Z 2026-09-13T05:00:00Z")
			// Nothing more may be expected on the ended task.
			r := departure()
			r.ExpectationID = "exp-NEW"
			h.refuse(agent, false, mustTime("2026-09-03T00:00:00Z"), RaiseCommand{r}, refuse.Conflict, "origin.taskId")
			h.refuse(agent, false, mustTime("2026-09-03T00:00:00Z"), TaskOutcomeCommand{TaskID: "task-7", Outcome: OutcomeCompleted}, refuse.Conflict, "taskId")
		})
	}
}

func TestCompletedOriginWithdrawsNothing(t *testing.T) {
	h := shipmentHarness(t)
	evs := h.do(agent, false, mustTime("2026-09-02T08:00:00Z"), TaskOutcomeCommand{TaskID: "task-7", Outcome: OutcomeCompleted})
	if len(evs) != 1 || h.view(depart).State != "open" {
		t.Fatalf("records %v", lapses(evs))
	}
}

// An outcome written by another tool without the withdrawals: the timekeeper
// withdraws on its next sweep, and nothing lapses meanwhile.
func TestSweepWithdrawsForAnOutcomeRecordedElsewhere(t *testing.T) {
	h := shipmentHarness(t)
	h.apply("a2a-server", Event{TS: mustTime("2026-09-11T08:00:00Z"), Type: TypeTaskOutcome,
		TaskOutcome: &TaskOutcome{TaskID: "task-7", Outcome: OutcomeCancelled}})
	expectLapses(t, h.commit(mustTime("2026-09-20T00:00:00Z")),
		"exp-01J8Q0DEPART withdrawn by watch", "exp-01J8Q0ARRIVE withdrawn by watch")
	expectLapses(t, h.commit(mustTime("2026-09-20T00:00:00Z")))
	if h.s.PendingWithdrawals() != 0 {
		t.Fatal("withdrawals still pending")
	}
}

func extend(r Raise, id, prev string, due string) Raise {
	r.ExpectationID, r.Supersedes, r.DueAt = id, prev, mustTime(due)
	r.Horizon = time.Time{}
	return r
}

func TestLineageBoundAndHumanExtension(t *testing.T) {
	h := newHarness(t)
	r := departure()
	r.Horizon = time.Time{}
	r.ExpectationID = "e1"
	h.do(agent, false, tRaise, RaiseCommand{r})
	now := mustTime("2026-09-11T10:00:00Z")
	expectLapses(t, h.commit(now), "e1 overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z")
	h.do(agent, false, now, SupersedeCommand{Raise: extend(r, "e2", "e1", "2026-09-12T03:15:00Z")})
	h.do(agent, false, now, SupersedeCommand{Raise: extend(r, "e3", "e2", "2026-09-13T03:15:00Z")})
	// Three expectations in the lineage: the bound. An agent may go no further.
	h.refuse(agent, false, now, SupersedeCommand{Raise: extend(r, "e4", "e3", "2026-09-14T03:15:00Z")}, refuse.Forbidden, "supersedes")
	// A person may, and is recorded as one.
	evs := h.do("ops@example.org", true, now, SupersedeCommand{Raise: extend(r, "e4", "e3", "2026-09-14T03:15:00Z")})
	if !evs[0].Raise.Human || evs[0].Raise.Origin != r.Origin {
		t.Fatalf("human extension: %s", evs[0].Encode())
	}
	v := h.view("e2")
	if v.State != "superseded" || v.SupersededBy != "e3" || fmt.Sprint(v.Lineage) != "[e1 e2 e3 e4]" {
		t.Fatalf("%s", jsonOf(v))
	}
	if v := h.view("e4"); v.State != "open" || !v.Human || v.Supersedes != "e3" {
		t.Fatalf("%s", jsonOf(v))
	}
	// Superseded expectations lapse no more; only the head can.
	expectLapses(t, h.commit(mustTime("2026-09-15T00:00:00Z")),
		"e4 overdue 2026-09-14T03:15:00Z 2026-09-14T09:15:00Z")
}

func TestLineageBoundIsConfigurable(t *testing.T) {
	h := newHarness(t)
	h.s.cfg.LineageMax = 1
	r := departure()
	r.ExpectationID = "e1"
	h.do(agent, false, tRaise, RaiseCommand{r})
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e2", "e1", "2026-09-12T03:15:00Z")}, refuse.Forbidden, "supersedes")
}

func TestSupersedeRules(t *testing.T) {
	h := newHarness(t)
	r := departure()
	r.ExpectationID = "e1"
	h.do(agent, false, tRaise, RaiseCommand{r})
	h.do(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e2", "e1", "2026-09-12T03:15:00Z")})

	// Identical to an ancestor (e1's terms again): refused, even for a person.
	back := r
	back.ExpectationID, back.Supersedes = "e3", "e2"
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: back}, refuse.Conflict, "supersedes")
	h.refuse("ops", true, tRaise, SupersedeCommand{Raise: back}, refuse.Conflict, "supersedes")
	// Identical to its parent.
	same := extend(r, "e3", "e2", "2026-09-12T03:15:00Z")
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: same}, refuse.Conflict, "supersedes")
	// Changing only the id or the origin is still identical.
	same.Origin = Origin{TaskID: "task-9"}
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: same}, refuse.Conflict, "supersedes")
	// Only the head of a lineage can be extended.
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e3", "e1", "2026-09-13T03:15:00Z")}, refuse.Conflict, "supersedes")
	// Only by its raiser or a person.
	h.refuse("someone-else", false, tRaise, SupersedeCommand{Raise: extend(r, "e3", "e2", "2026-09-13T03:15:00Z")}, refuse.Forbidden, "supersedes")
	// Same subject.
	moved := extend(r, "e3", "e2", "2026-09-13T03:15:00Z")
	moved.Subject = Subject{"shipment", "OTHER"}
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: moved}, refuse.Invalid, "subject")
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e3", "nope", "2026-09-13T03:15:00Z")}, refuse.NotFound, "supersedes")
	h.refuse(agent, false, tRaise, RaiseCommand{extend(r, "e3", "e2", "2026-09-13T03:15:00Z")}, refuse.Invalid, "supersedes")
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e3", "", "2026-09-13T03:15:00Z")}, refuse.Invalid, "supersedes")
	// A satisfied expectation needs no more time.
	h.do("feed", false, tRaise, fact(r.FactKey, "2026-09-01T17:00:00Z"))
	h.refuse(agent, false, tRaise, SupersedeCommand{Raise: extend(r, "e3", "e2", "2026-09-13T03:15:00Z")}, refuse.Conflict, "supersedes")
}

func TestRaiseRefusals(t *testing.T) {
	h := shipmentHarness(t)
	now := tRaise
	mod := func(f func(*Raise)) RaiseCommand {
		r := departure()
		r.ExpectationID = "e-new"
		f(&r)
		return RaiseCommand{r}
	}
	cases := []struct {
		name  string
		cmd   RaiseCommand
		code  refuse.Code
		field string
	}{
		{"no dueAt", mod(func(r *Raise) { r.DueAt = time.Time{} }), refuse.Invalid, "dueAt"},
		{"no basis", mod(func(r *Raise) { r.Basis = "" }), refuse.Invalid, "basis"},
		{"bad basis", mod(func(r *Raise) { r.Basis = "hoped" }), refuse.Invalid, "basis"},
		{"no id", mod(func(r *Raise) { r.ExpectationID = "" }), refuse.Invalid, "expectationId"},
		{"id with space", mod(func(r *Raise) { r.ExpectationID = "a b" }), refuse.Invalid, "expectationId"},
		{"no kind", mod(func(r *Raise) { r.Kind = "" }), refuse.Invalid, "kind"},
		{"no subject", mod(func(r *Raise) { r.Subject.ID = "" }), refuse.Invalid, "subject.id"},
		{"no fact key", mod(func(r *Raise) { r.FactKey = "" }), refuse.Invalid, "satisfiedBy.factKey"},
		{"immutable", mod(func(r *Raise) { r.ExpectationID = depart }), refuse.Conflict, "expectationId"},
		{"negative grace", mod(func(r *Raise) { r.Grace = -time.Second }), refuse.Invalid, "grace"},
		{"horizon before due", mod(func(r *Raise) { r.Horizon = r.DueAt.Add(-time.Hour) }), refuse.Invalid, "horizon"},
		{"unknown anchor", mod(func(r *Raise) { r.Anchor = &Anchor{ExpectationID: "nope"} }), refuse.NotFound, "anchor.expectationId"},
		{"self anchor", mod(func(r *Raise) { r.Anchor = &Anchor{ExpectationID: "e-new"} }), refuse.Invalid, "anchor.expectationId"},
		{"negative offset", mod(func(r *Raise) { r.Anchor = &Anchor{ExpectationID: depart, Offset: -time.Minute} }), refuse.Invalid, "anchor.offset"},
		{"unknown after", mod(func(r *Raise) { r.After = []string{"nope"} }), refuse.NotFound, "after"},
		{"after twice", mod(func(r *Raise) { r.After = []string{depart, depart} }), refuse.Invalid, "after"},
		{"after on another subject", mod(func(r *Raise) { r.Subject.ID = "OTHER"; r.After = []string{depart} }), refuse.Invalid, "after"},
		{"text too long", mod(func(r *Raise) { r.Expects = string(make([]byte, 5000)) }), refuse.Invalid, "expects"},
		{"context without task", mod(func(r *Raise) { r.Origin = Origin{ContextID: "c"} }), refuse.Invalid, "origin.taskId"},
		{"reply-to not a URL", mod(func(r *Raise) { r.ReplyTo = &ReplyTo{URL: "agent"} }), refuse.Invalid, "replyTo.url"},
		{"push token without URL", mod(func(r *Raise) { r.ReplyTo = &ReplyTo{URL: "http://a/", PushToken: "t"} }), refuse.Invalid, "replyTo.push.url"},
		{"push authentication without URL", mod(func(r *Raise) { r.ReplyTo = &ReplyTo{URL: "http://a/", PushAuthScheme: "Bearer"} }), refuse.Invalid, "replyTo.push.url"},
		{"push credentials without scheme", mod(func(r *Raise) { r.ReplyTo = &ReplyTo{PushURL: "http://a/", PushAuthCredentials: "c"} }), refuse.Invalid, "replyTo.push.authentication.scheme"},
		{"push scheme not a token", mod(func(r *Raise) { r.ReplyTo = &ReplyTo{PushURL: "http://a/", PushAuthScheme: "Bear er"} }), refuse.Invalid, "replyTo.push.authentication.scheme"},
		{"push credentials padded", mod(func(r *Raise) {
			r.ReplyTo = &ReplyTo{PushURL: "http://a/", PushAuthScheme: "Bearer", PushAuthCredentials: " c"}
		}), refuse.Invalid, "replyTo.push.authentication.credentials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { h.refuse(agent, false, now, c.cmd, c.code, c.field) })
	}
	h.refuse("", false, now, mod(func(*Raise) {}), refuse.Forbidden, "actor")
}

func TestFactAndWithdrawRefusals(t *testing.T) {
	h := shipmentHarness(t)
	h.refuse("feed", false, tRaise, fact("k", "2026-09-01T17:00:01Z"), refuse.Invalid, "at")
	h.refuse("feed", false, tRaise, FactCommand{Subject: shipment}, refuse.Invalid, "factKey")
	h.refuse("feed", false, tRaise, FactCommand{FactKey: "k"}, refuse.Invalid, "subject.type")
	h.refuse("stranger", false, tRaise, WithdrawCommand{ExpectationID: depart}, refuse.Forbidden, "by")
	h.refuse(agent, false, tRaise, WithdrawCommand{ExpectationID: "nope"}, refuse.NotFound, "expectationId")
	h.do(agent, false, tRaise, WithdrawCommand{ExpectationID: depart, Reason: "booking moved"})
	h.refuse(agent, false, tRaise, WithdrawCommand{ExpectationID: depart}, refuse.Conflict, "expectationId")
	if v := h.view(depart); v.Withdrawn == nil || v.Withdrawn.By != agent || v.Withdrawn.Reason != "booking moved" {
		t.Fatalf("%s", jsonOf(v))
	}
	// The timekeeper and a person may withdraw too.
	h.do(timekeeper, false, tRaise, WithdrawCommand{ExpectationID: arrive})
}

func TestOnlyTheTimekeeperCommitsLapses(t *testing.T) {
	h := shipmentHarness(t)
	now := mustTime("2026-09-11T10:00:00Z")
	cmd := LapseCommand{ExpectationID: depart, Kind: LapseOverdue}
	h.refuse(agent, false, now, cmd, refuse.Forbidden, "by")
	h.refuse("ops", true, now, cmd, refuse.Forbidden, "by")
	h.refuse(timekeeper, false, mustTime("2026-09-11T09:15:00Z"), cmd, refuse.Conflict, "lapse")
	h.refuse(timekeeper, false, now, LapseCommand{ExpectationID: depart, Kind: LapseStalled}, refuse.Conflict, "lapse")
	h.refuse(timekeeper, false, now, LapseCommand{ExpectationID: depart, Kind: LapseOverdue, DueAt: tRaise}, refuse.Conflict, "dueAt")
	h.refuse(timekeeper, false, now, LapseCommand{ExpectationID: "nope", Kind: LapseOverdue}, refuse.NotFound, "expectationId")
	h.refuse(timekeeper, false, now, LapseCommand{ExpectationID: depart, Kind: "late"}, refuse.Invalid, "lapse")
	evs := h.do(timekeeper, false, now, cmd)
	expectLapses(t, evs, "exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z")

	// Recording the same lapse again is a no-op, through Decide and through Apply.
	if again, err := h.s.Decide(timekeeper, false, now.Add(time.Hour), cmd); err != nil || len(again) != 0 {
		t.Fatalf("second commit = %v, %v; want nothing", again, err)
	}
	h.apply(timekeeper, evs...)
	if n := len(h.view(depart).Lapses); n != 1 {
		t.Fatalf("lapses recorded = %d, want 1", n)
	}
	if n := len(h.s.Lapses(time.Time{})); n != 1 {
		t.Fatalf("lapse log = %d, want 1", n)
	}
}

func TestApplyIgnoresWhatTheLedgerContradicts(t *testing.T) {
	h := shipmentHarness(t)
	before := jsonOf(h.s.List(Filter{}))
	ts := mustTime("2026-09-02T00:00:00Z")
	h.apply("tool", []Event{
		// A second raise of the same id.
		{TS: ts, Type: TypeRaise, Raise: func() *Raise { r := departure(); r.By = "x"; r.Kind = "changed"; return &r }()},
		// A raise anchored on an unknown expectation.
		{TS: ts, Type: TypeRaise, Raise: func() *Raise {
			r := arrival()
			r.ExpectationID, r.By, r.Anchor = "x1", "x", &Anchor{ExpectationID: "nope"}
			return &r
		}()},
		// A withdrawal of an unknown expectation.
		{TS: ts, Type: TypeWithdraw, Withdraw: &Withdraw{ExpectationID: "nope", By: "x"}},
		// A lapse whose id does not match its terms.
		{TS: ts, Type: TypeLapse, Lapse: &Lapse{LapseID: "lps_forged", ExpectationID: depart, Kind: LapseOverdue, DueAt: ts, LapsedAt: ts, By: "x"}},
	}...)
	// A record missing what it needs.
	h.s.Apply(Meta{}, Event{TS: ts, Type: TypeRaise, Raise: &Raise{ExpectationID: "x2"}})
	if after := jsonOf(h.s.List(Filter{})); after != before {
		t.Fatalf("state changed:\n%s\n%s", before, after)
	}
}

func TestViewJSON(t *testing.T) {
	h := shipmentHarness(t)
	h.do("carrier-feed", false, mustTime("2026-09-11T04:10:00Z"), fact("shipment.departed:PA-2026-0901", "2026-09-11T04:00:00Z"))
	h.commit(mustTime("2026-09-11T12:00:00Z"))
	want := `{"expectationId":"exp-01J8Q0ARRIVE","state":"open","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-2026-0901"},"expects":"an arrival event at DOH","satisfiedBy":{"factKey":"shipment.arrived:PA-2026-0901"},"basis":"observed","by":"agent://booking","origin":{"taskId":"task-7","contextId":"ctx-3"},"raisedAt":"2026-09-01T17:00:00Z","projectedDue":"2026-09-11T05:00:00Z","currentDue":"2026-09-11T05:45:00Z","reanchoredAt":"2026-09-11T04:00:00Z","grace":"PT6H","anchor":{"expectationId":"exp-01J8Q0DEPART","offset":"PT1H45M"},"after":["exp-01J8Q0DEPART"],"horizon":"2026-09-13T05:00:00Z","lineage":["exp-01J8Q0ARRIVE"],"lapses":[{"lapseId":"lps_1a0d995a16d1775e01d0a3f5","expectationId":"exp-01J8Q0ARRIVE","lapse":"overdue","dueAt":"2026-09-11T05:45:00Z","lapsedAt":"2026-09-11T11:45:00Z","noticedAt":"2026-09-11T12:00:00Z","by":"watch","seq":4}]}`
	if got := jsonOf(h.view(arrive)); got != want {
		t.Fatalf("show --json:\n%s\nwant\n%s", got, want)
	}
	if got := h.s.List(Filter{State: "satisfied"}); len(got) != 1 || got[0].ExpectationID != depart {
		t.Fatalf("List(satisfied) = %v", got)
	}
	ids := func(vs []View) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.ExpectationID)
		}
		return out
	}
	if got := ids(h.s.List(Filter{Subject: shipment, TaskID: "task-7"})); !slices.Equal(got, []string{depart, arrive}) {
		t.Fatalf("List = %v", got)
	}
	if got := ids(h.s.List(Filter{Kind: "nope"})); len(got) != 0 {
		t.Fatalf("List = %v", got)
	}
}

func TestConfig(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	c := DefaultConfig()
	c.LineageMax = 0
	if err := c.Validate(); err == nil {
		t.Fatal("LineageMax 0 accepted")
	}
	c = DefaultConfig()
	c.Timekeeper = ""
	if err := c.Validate(); err == nil {
		t.Fatal("empty Timekeeper accepted")
	}
}

func TestSweepMaxLeavesTheRestForTheNextSweep(t *testing.T) {
	h := shipmentHarness(t)
	now := mustTime("2026-09-15T00:00:00Z")
	first := h.s.Sweep(now, 3)
	if len(first) != 3 {
		t.Fatalf("Sweep(max 3) = %d records", len(first))
	}
	h.apply(timekeeper, first...)
	rest := h.commit(now)
	expectLapses(t, append(first, rest...),
		"exp-01J8Q0DEPART overdue 2026-09-11T03:15:00Z 2026-09-11T09:15:00Z",
		"exp-01J8Q0DEPART stalled 2026-09-11T03:15:00Z 2026-09-13T05:00:00Z",
		"exp-01J8Q0ARRIVE overdue 2026-09-11T05:00:00Z 2026-09-11T11:00:00Z",
		"exp-01J8Q0ARRIVE stalled 2026-09-11T05:00:00Z 2026-09-13T05:00:00Z")
}

func TestSweepWithNothingDueAllocatesNothing(t *testing.T) {
	h := shipmentHarness(t)
	now := mustTime("2026-09-02T00:00:00Z")
	if n := testing.AllocsPerRun(100, func() { h.s.Sweep(now, 0) }); n != 0 {
		t.Fatalf("Sweep allocates %v times with nothing due", n)
	}
}

// FuzzFold applies arbitrary lines, one per line, sweeps and commits as the
// timekeeper, and reads every view: nothing may panic, and a second sweep
// at the same instant returns nothing.
func FuzzFold(f *testing.F) {
	var seed []byte
	for _, c := range wireCases {
		seed = append(append(seed, c.line...), '\n')
	}
	f.Add(seed)
	f.Add([]byte(shipmentLog))
	f.Fuzz(func(t *testing.T, log []byte) {
		s := NewState(DefaultConfig())
		var last time.Time
		for i, line := range bytes.Split(log, []byte("\n")) {
			if i >= 200 {
				break
			}
			e, err := Decode(line)
			if err != nil {
				continue
			}
			s.Apply(Meta{Seq: uint64(i + 1), Actor: "a", TS: e.TS}, e)
			if e.TS.After(last) {
				last = e.TS
			}
		}
		if last.IsZero() || !inRange(last) {
			return
		}
		now := last.Add(90 * 24 * time.Hour)
		out := s.Sweep(now, 0)
		for _, e := range out {
			back, err := Decode(e.Encode())
			if err != nil {
				t.Fatalf("swept record does not decode: %s: %v", e.Encode(), err)
			}
			s.Apply(Meta{Actor: s.Config().Timekeeper, TS: now}, back)
		}
		if again := s.Sweep(now, 0); len(again) != 0 {
			t.Fatalf("second sweep returned %v", lapses(again))
		}
		for _, v := range s.List(Filter{}) {
			jsonOf(v)
		}
		s.Lapses(time.Time{})
	})
}

// shipmentLog is the draft's example as a log: both steps raised, the
// arrival reported without a departure, the timekeeper's commits.
const shipmentLog = `{"ts":"2026-09-01T17:00:00Z","type":"expect.raise","expectationId":"exp-01J8Q0DEPART","kind":"shipment.departure","subject":{"type":"shipment","id":"PA-2026-0901"},"expects":"a departure event at FRA","satisfiedBy":{"factKey":"shipment.departed:PA-2026-0901"},"dueAt":"2026-09-11T03:15:00Z","grace":"PT6H","horizon":"2026-09-13T05:00:00Z","basis":"observed","origin":{"taskId":"task-7","contextId":"ctx-3"},"by":"agent://booking"}
{"ts":"2026-09-01T17:00:00Z","type":"expect.raise","expectationId":"exp-01J8Q0ARRIVE","kind":"shipment.arrival","subject":{"type":"shipment","id":"PA-2026-0901"},"expects":"an arrival event at DOH","satisfiedBy":{"factKey":"shipment.arrived:PA-2026-0901"},"dueAt":"2026-09-11T05:00:00Z","grace":"PT6H","anchor":{"expectationId":"exp-01J8Q0DEPART","offset":"PT1H45M"},"after":["exp-01J8Q0DEPART"],"horizon":"2026-09-13T05:00:00Z","basis":"observed","origin":{"taskId":"task-7","contextId":"ctx-3"},"by":"agent://booking"}
{"ts":"2026-09-11T06:10:00Z","type":"fact","factKey":"shipment.arrived:PA-2026-0901","subject":{"type":"shipment","id":"PA-2026-0901"},"at":"2026-09-11T06:00:00Z","by":"feed"}
{"ts":"2026-09-12T00:00:00Z","type":"lapse","lapseId":"lps_7ad8cd7dd2f27394f49f3e90","expectationId":"exp-01J8Q0DEPART","lapse":"skipped","dueAt":"2026-09-11T03:15:00Z","lapsedAt":"2026-09-11T06:00:00Z","by":"watch"}
{"ts":"2026-09-12T00:00:00Z","type":"lapse","lapseId":"lps_c6f34f55949b7460476735ab","expectationId":"exp-01J8Q0DEPART","lapse":"overdue","dueAt":"2026-09-11T03:15:00Z","lapsedAt":"2026-09-11T09:15:00Z","by":"watch"}`

// A raise's replyTo is kept for the timekeeper (token included), shown in the
// view without its token, and inherited by an extension that gives none.
func TestReplyToKeptAndInherited(t *testing.T) {
	h := newHarness(t)
	r := departure()
	r.Horizon = time.Time{}
	r.ExpectationID = "e1"
	rt := ReplyTo{URL: "http://127.0.0.1:9/a2a", Extension: "urn:tally:ext:expect", PushURL: "http://127.0.0.1:9/push", PushToken: "secret",
		PushAuthScheme: "Bearer", PushAuthCredentials: "also-secret"}
	r.ReplyTo = &rt
	h.do(agent, false, tRaise, RaiseCommand{r})
	if got, ok := h.s.ReplyTo("e1"); !ok || got != rt {
		t.Fatalf("ReplyTo = %+v, %v", got, ok)
	}
	v := h.view("e1")
	if v.ReplyTo == nil || v.ReplyTo.PushToken != "set" || v.ReplyTo.URL != rt.URL {
		t.Fatalf("%s", jsonOf(v))
	}
	if b, _ := json.Marshal(v.ReplyTo); string(b) != `{"url":"http://127.0.0.1:9/a2a","extension":"urn:tally:ext:expect","push":{"url":"http://127.0.0.1:9/push","token":"set","authentication":{"scheme":"Bearer","credentials":"set"}}}` {
		t.Fatalf("view replyTo = %s", b)
	}
	ext := r
	ext.ExpectationID, ext.Supersedes, ext.ReplyTo = "e2", "e1", nil
	ext.DueAt = ext.DueAt.Add(time.Hour)
	h.do(agent, false, tRaise, SupersedeCommand{Raise: ext})
	if got, ok := h.s.ReplyTo("e2"); !ok || got != rt {
		t.Fatalf("extension's ReplyTo = %+v, %v", got, ok)
	}
	if _, ok := h.s.ReplyTo(depart); ok {
		t.Fatal("an expectation raised without replyTo has one")
	}
}
