package expect

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// script is a random ledger history: commands at advancing times, with a
// timekeeper that sweeps at some of them.
type script struct {
	rng      *rand.Rand
	watch    *rand.Rand // the timekeeper's own choices, so eager and lazy scripts issue the same commands
	h        *harness
	now      time.Time
	ids      []string
	anchors  bool // whether raises may carry anchors
	backdate bool // whether facts may be recorded after they happened
	eager    bool // whether the timekeeper sweeps between commands
}

var subjects = []Subject{{"shipment", "A"}, {"shipment", "B"}, {"doc", "C"}}

func (sc *script) pick() string {
	if len(sc.ids) == 0 {
		return "none"
	}
	return sc.ids[sc.rng.IntN(len(sc.ids))]
}

func (sc *script) step() {
	r := sc.rng
	sc.now = sc.now.Add(time.Duration(r.IntN(180)) * time.Minute)
	actor := []string{"agent-a", "agent-b"}[r.IntN(2)]
	var cmd Command
	switch n := r.IntN(100); {
	case n < 35:
		id := fmt.Sprintf("e%d", len(sc.ids))
		rs := Raise{
			ExpectationID: id, Kind: "step", Subject: subjects[r.IntN(len(subjects))],
			FactKey: "done:" + id, DueAt: sc.now.Add(time.Duration(r.IntN(600)) * time.Minute),
			Grace: time.Duration(r.IntN(4)) * time.Hour, Basis: BasisDeclared,
		}
		if r.IntN(3) == 0 {
			rs.FactKey = "shared:" + rs.Subject.ID // several expectations on one key
		}
		if r.IntN(2) == 0 {
			rs.Horizon = rs.DueAt.Add(time.Duration(r.IntN(24)) * time.Hour)
		}
		if r.IntN(3) == 0 {
			rs.Origin = Origin{TaskID: fmt.Sprintf("task-%d", r.IntN(4))}
		}
		if prev := sc.pick(); prev != "none" && r.IntN(2) == 0 {
			if v, _ := sc.h.s.Expectation(prev); v.Subject == rs.Subject {
				rs.After = []string{prev}
				if sc.anchors && r.IntN(2) == 0 {
					rs.Anchor = &Anchor{ExpectationID: prev, Offset: time.Duration(r.IntN(120)) * time.Minute}
				}
			}
		}
		sc.ids = append(sc.ids, id)
		cmd = RaiseCommand{rs}
	case n < 70:
		at := sc.now
		if sc.backdate {
			at = at.Add(-time.Duration(r.IntN(300)) * time.Minute)
		}
		key, subj := "noise", subjects[r.IntN(len(subjects))]
		if id := sc.pick(); id != "none" && r.IntN(4) != 0 {
			v, _ := sc.h.s.Expectation(id)
			key, subj = v.SatisfiedBy.FactKey, v.Subject
		}
		cmd = FactCommand{FactKey: key, Subject: subj, At: at}
	case n < 80:
		id := sc.pick()
		v, ok := sc.h.s.Expectation(id)
		if !ok {
			return
		}
		rs := Raise{
			ExpectationID: fmt.Sprintf("e%d", len(sc.ids)), Kind: v.Kind, Subject: v.Subject,
			FactKey: v.SatisfiedBy.FactKey, DueAt: v.CurrentDue.Add(time.Duration(r.IntN(3)) * time.Hour),
			Basis: BasisDeclared, Supersedes: id,
		}
		actor = v.By
		sc.ids = append(sc.ids, rs.ExpectationID)
		cmd = SupersedeCommand{Raise: rs}
	case n < 85:
		cmd = WithdrawCommand{ExpectationID: sc.pick(), Reason: "changed plans"}
	case n < 90:
		cmd = TaskOutcomeCommand{TaskID: fmt.Sprintf("task-%d", r.IntN(4)), Outcome: []Outcome{OutcomeCompleted, OutcomeCancelled, OutcomeFailed}[r.IntN(3)]}
	default:
		// An outcome recorded by another tool, without the withdrawals.
		sc.h.apply("other-tool", Event{TS: sc.now, Type: TypeTaskOutcome,
			TaskOutcome: &TaskOutcome{TaskID: fmt.Sprintf("task-%d", r.IntN(4)), Outcome: OutcomeCancelled}})
		return
	}
	human := r.IntN(10) == 0
	if evs, err := sc.h.s.Decide(actor, human, sc.now, cmd); err == nil {
		sc.h.apply(actor, evs...)
	}
	if sc.eager && sc.watch.IntN(2) == 0 {
		sc.h.commit(sc.now)
	}
}

func runScript(t *testing.T, seed uint64, steps int, anchors, backdate, eager bool) *script {
	sc := &script{
		rng: rand.New(rand.NewPCG(seed, 7)), watch: rand.New(rand.NewPCG(seed, 8)), h: newHarness(t), now: tRaise,
		anchors: anchors, backdate: backdate, eager: eager,
	}
	for range steps {
		sc.step()
	}
	return sc
}

// snapshot renders everything a reader can see of a state at now.
func snapshot(s *State, now time.Time) string {
	var b strings.Builder
	b.WriteString(jsonOf(s.List(Filter{})))
	b.WriteString(jsonOf(s.Lapses(time.Time{})))
	for _, e := range s.Sweep(now, 0) {
		b.Write(e.Encode())
	}
	return b.String()
}

func TestReplayIsDeterministic(t *testing.T) {
	for seed := range uint64(40) {
		sc := runScript(t, seed, 300, true, true, true)
		end := sc.now.Add(48 * time.Hour)
		want := snapshot(sc.h.s, end)
		for range 2 {
			s := NewState(sc.h.s.Config())
			for i, line := range sc.h.lines {
				e, err := Decode([]byte(line))
				if err != nil {
					t.Fatal(err)
				}
				s.Apply(sc.h.metas[i], e)
			}
			if got := snapshot(s, end); got != want {
				t.Fatalf("seed %d: replay differs:\n%s\n%s", seed, want, got)
			}
		}
	}
}

// TestSweepApplySweep: once a sweep's records are applied, sweeping again
// at the same instant returns nothing, and committing them twice changes
// nothing (at-least-once timekeepers).
func TestSweepApplySweep(t *testing.T) {
	for seed := range uint64(40) {
		sc := runScript(t, seed, 300, true, true, false)
		for _, now := range []time.Time{sc.now, sc.now.Add(24 * time.Hour), sc.now.Add(30 * 24 * time.Hour)} {
			out := sc.h.commit(now)
			before := snapshot(sc.h.s, now)
			if again := sc.h.s.Sweep(now, 0); len(again) != 0 {
				t.Fatalf("seed %d: a second sweep returned %v", seed, lapses(again))
			}
			sc.h.apply(timekeeper, out...) // a second timekeeper commits the same records
			if after := snapshot(sc.h.s, now); after != before {
				t.Fatalf("seed %d: re-applying a sweep changed the state", seed)
			}
		}
	}
}

// TestWatcherTimingDoesNotMatter: without re-anchoring and without
// backdated facts, a timekeeper sweeping after every command and one that
// sweeps once at the end record the same lapses, except those the late
// timekeeper may no longer record: on expectations since withdrawn,
// superseded, or raised on a task since cancelled or failed.
func TestWatcherTimingDoesNotMatter(t *testing.T) {
	for seed := range uint64(40) {
		eager := runScript(t, seed, 300, false, false, true)
		lazy := runScript(t, seed, 300, false, false, false)
		end := eager.now.Add(30 * 24 * time.Hour)
		eager.h.commit(end)
		lazy.h.commit(end)
		ids := func(s *State) map[string]string {
			out := map[string]string{}
			for _, l := range s.Lapses(time.Time{}) {
				out[l.LapseID] = l.ExpectationID
			}
			return out
		}
		early, late := ids(eager.h.s), ids(lazy.h.s)
		for id, exp := range late {
			if early[id] == "" {
				t.Fatalf("seed %d: the late watcher recorded %s on %s, the eager one did not", seed, id, exp)
			}
		}
		for id, exp := range early {
			if late[id] != "" {
				continue
			}
			v, _ := lazy.h.s.Expectation(exp)
			ended := false
			if v.Origin != nil {
				o, ok := lazy.h.s.TaskOutcome(v.Origin.TaskID)
				ended = ok && o != OutcomeCompleted
			}
			if v.State != "withdrawn" && v.State != "superseded" && !ended {
				t.Fatalf("seed %d: the late watcher missed %s on %s", seed, id, jsonOf(v))
			}
		}
	}
}

// TestSweepMatchesNaiveReference checks every swept lapse against the rules
// evaluated by brute force over the views, and that nothing due is missed.
func TestSweepMatchesNaiveReference(t *testing.T) {
	for seed := range uint64(40) {
		sc := runScript(t, seed, 200, true, true, false)
		now := sc.now.Add(12 * time.Hour)
		got := map[string]bool{}
		for _, e := range sc.h.s.Sweep(now, 0) {
			if e.Lapse != nil {
				got[e.Lapse.ExpectationID+" "+string(e.Lapse.Kind)] = true
			}
		}
		want := naiveLapses(sc.h, now)
		if fmt.Sprint(sortedKeys(got)) != fmt.Sprint(sortedKeys(want)) {
			t.Fatalf("seed %d:\nsweep %v\nnaive %v", seed, sortedKeys(got), sortedKeys(want))
		}
	}
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// naiveLapses evaluates the lapse rules directly from the log and views:
// no index, no chains, no caches.
func naiveLapses(h *harness, now time.Time) map[string]bool {
	type fact struct {
		line    int
		key     string
		subject Subject
		at      time.Time
	}
	var facts []fact
	raisedLine := map[string]int{}
	cancelled := map[string]bool{}
	for i, l := range h.lines {
		e, _ := Decode([]byte(l))
		switch {
		case e.Fact != nil:
			facts = append(facts, fact{i, e.Fact.FactKey, e.Fact.Subject, e.Fact.At})
		case e.Raise != nil:
			if _, ok := raisedLine[e.Raise.ExpectationID]; !ok {
				raisedLine[e.Raise.ExpectationID] = i
			}
		case e.TaskOutcome != nil:
			if _, seen := cancelled[e.TaskOutcome.TaskID]; !seen {
				cancelled[e.TaskOutcome.TaskID] = e.TaskOutcome.Outcome != OutcomeCompleted
			}
		}
	}
	views := map[string]View{}
	for _, v := range h.s.List(Filter{}) {
		views[v.ExpectationID] = v
	}
	out := map[string]bool{}
	for id, v := range views {
		if v.State == "withdrawn" || v.State == "superseded" || (v.Origin != nil && cancelled[v.Origin.TaskID]) {
			continue
		}
		openAt := func(t time.Time) bool { return v.ActualAt == nil || v.ActualAt.After(t) }
		recorded := func(kind LapseKind, due time.Time) bool {
			for _, l := range v.Lapses {
				if l.Lapse == kind && (kind != LapseOverdue || l.DueAt.Equal(due)) {
					return true
				}
			}
			return false
		}
		grace, _ := ParseDuration(v.Grace + map[bool]string{true: "PT0S"}[v.Grace == ""])
		if l := v.CurrentDue.Add(grace); l.Before(now) && openAt(l) && !recorded(LapseOverdue, v.CurrentDue) {
			out[id+" overdue"] = true
		}
		if v.Horizon != nil && v.Horizon.Before(now) && openAt(*v.Horizon) && !recorded(LapseStalled, time.Time{}) {
			heard := false
			for _, f := range facts {
				if f.line > raisedLine[id] && f.subject == v.Subject && !f.at.After(*v.Horizon) {
					heard = true
				}
			}
			if !heard {
				out[id+" stalled"] = true
			}
		}
	}
	// Skipped depends on log order (was the earlier step open when the later
	// one landed?); take it from a second, index-free evaluation: replay the
	// log and watch each satisfaction.
	skips := naiveSkipped(h)
	for id, at := range skips {
		v := views[id]
		recorded := false
		for _, l := range v.Lapses {
			recorded = recorded || l.Lapse == LapseSkipped
		}
		if v.State == "withdrawn" || v.State == "superseded" || (v.Origin != nil && cancelled[v.Origin.TaskID]) || recorded {
			continue
		}
		if at.Before(now) && (v.ActualAt == nil || v.ActualAt.After(at)) {
			out[id+" skipped"] = true
		}
	}
	return out
}

// naiveSkipped replays the log with plain maps: when a step is satisfied,
// every open step its after names (through supersession) on the same
// subject is marked skipped at the earliest such instant.
func naiveSkipped(h *harness) map[string]time.Time {
	type exp struct {
		r         *Raise
		life      string
		child     string
		cancelled bool
	}
	exps := map[string]*exp{}
	var order []string
	tasks := map[string]bool{}
	seenTask := map[string]bool{}
	factSeen := map[string]time.Time{}
	skipped := map[string]time.Time{}
	headOf := func(id string) *exp {
		x := exps[id]
		for x != nil && x.child != "" {
			x = exps[x.child]
		}
		return x
	}
	var satisfy func(x *exp, at time.Time)
	satisfy = func(x *exp, at time.Time) {
		x.life = "satisfied"
		for _, a := range x.r.After {
			p := headOf(a)
			if p != nil && p.life == "open" && !p.cancelled && p.r.Subject == x.r.Subject {
				if t, ok := skipped[p.r.ExpectationID]; !ok || at.Before(t) {
					skipped[p.r.ExpectationID] = at
				}
			}
		}
	}
	for _, l := range h.lines {
		e, _ := Decode([]byte(l))
		switch {
		case e.Raise != nil:
			if _, dup := exps[e.Raise.ExpectationID]; dup {
				continue
			}
			x := &exp{r: e.Raise, life: "open", cancelled: tasks[e.Raise.Origin.TaskID]}
			exps[e.Raise.ExpectationID] = x
			order = append(order, e.Raise.ExpectationID)
			if p := e.Raise.Supersedes; p != "" {
				exps[p].life, exps[p].child = "superseded", e.Raise.ExpectationID
			}
			if at, ok := factSeen[e.Raise.FactKey]; ok {
				satisfy(x, at)
			}
		case e.Fact != nil:
			if _, ok := factSeen[e.Fact.FactKey]; !ok {
				factSeen[e.Fact.FactKey] = e.Fact.At
			}
			for _, id := range order {
				if x := exps[id]; x.life == "open" && x.r.FactKey == e.Fact.FactKey {
					satisfy(x, e.Fact.At)
				}
			}
		case e.Withdraw != nil:
			if x := exps[e.Withdraw.ExpectationID]; x != nil && x.life == "open" {
				x.life = "withdrawn"
			}
		case e.TaskOutcome != nil:
			if seenTask[e.TaskOutcome.TaskID] {
				continue
			}
			seenTask[e.TaskOutcome.TaskID] = true
			if e.TaskOutcome.Outcome != OutcomeCompleted {
				tasks[e.TaskOutcome.TaskID] = true
				for _, x := range exps {
					if x.r.Origin.TaskID == e.TaskOutcome.TaskID {
						x.cancelled = true
					}
				}
			}
		}
	}
	return skipped
}
