package claim

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"tally/refuse"
)

// done drives a claim without slots to local success: its testament received.
func (l *ledger) done(id string) {
	l.t.Helper()
	l.do(maintainer, Post{Claim: id})
	l.do(parser, AcquireReceipt{Claim: id})
	l.do(parser, CloseTestament{Claim: id, Testament: "T", Generation: 1, Outcome: Complete, Summary: "done"})
	l.do(parser, PostTestament{Claim: id, Testament: "T"})
	l.do(maintainer, ReceiveTestament{Claim: id, Testament: "T"})
}

func (l *ledger) create(id string, dependsOn, awaits []string) {
	l.t.Helper()
	l.do(maintainer, Create{Claim: id, Respondent: parser, Work: "w", DependsOn: dependsOn, Awaits: awaits})
}

func TestLeastFixpointOnCycles(t *testing.T) {
	l := newLedger(t)
	l.create("SELF", []string{"SELF"}, nil)
	l.create("A", []string{"B"}, nil)
	l.create("B", []string{"A"}, nil)
	l.create("W1", nil, []string{"W2"})
	l.create("W2", nil, []string{"W1"})
	for _, id := range []string{"SELF", "A", "B", "W1", "W2"} {
		l.done(id)
	}
	for _, id := range []string{"SELF", "A", "B", "W1", "W2"} {
		v := l.view(id)
		if !v.LocalSuccess || v.State.Terminal() {
			t.Fatalf("%s: local %v state %s; a cycle must stay unsatisfied", id, v.LocalSuccess, v.State)
		}
	}
	// A chain grows from its root.
	l.create("R3", []string{"R2"}, nil)
	l.create("R2", []string{"R1"}, nil)
	l.create("R1", nil, nil)
	l.done("R3")
	l.done("R2")
	l.expect("R3", TestamentAcknowledged)
	l.done("R1")
	for _, id := range []string{"R1", "R2", "R3"} {
		l.expect(id, Satisfied)
	}
}

func TestDependsOnFailurePropagatesAwaitsDoesNot(t *testing.T) {
	l := newLedger(t)
	l.create("ORIGIN", nil, nil)
	l.create("MID", []string{"ORIGIN"}, nil)
	l.create("TOP", []string{"MID"}, nil)
	l.create("WAITER", nil, []string{"ORIGIN"})
	l.done("WAITER")
	l.expect("WAITER", TestamentAcknowledged) // waits for ORIGIN to end
	evs := l.do(maintainer, Cancel{Claim: "ORIGIN", Reason: "dropped"})
	if len(evs) != 3 || evs[1].Type != TypeDependency || evs[1].Claim != "MID" || evs[2].Claim != "TOP" || evs[2].Origin != "ORIGIN" || evs[2].On != "MID" {
		t.Fatalf("batch %v", evs)
	}
	l.expect("MID", DependencyFailed)
	l.expect("TOP", DependencyFailed)
	if tm := l.view("TOP").Terminal; tm.Origin != "ORIGIN" || tm.On != "MID" {
		t.Fatalf("TOP terminal %+v", tm)
	}
	l.expect("WAITER", Satisfied) // any terminal Awaits target releases the wait
	// A new claim depending on a failed one fails in its creation batch.
	evs = l.do(maintainer, Create{Claim: "LATE", Respondent: parser, Work: "w", DependsOn: []string{"TOP"}})
	if len(evs) != 2 {
		t.Fatalf("late batch %v", evs)
	}
	l.expect("LATE", DependencyFailed)
	// A dependency fact that does not hold is refused.
	l.create("FREE", []string{"WAITER"}, nil)
	l.refuse(maintainer, CommitDependency{Claim: "FREE"}, refuse.Conflict, "depends_on")
	l.append(maintainer, Event{TS: l.now, Type: TypeDependency, Claim: "FREE", On: "WAITER", Origin: "WAITER"})
	if _, n := l.s.Ignored(); n != 1 {
		t.Fatal("false dependency fact applied")
	}
	// View edges carry their targets' states.
	v := l.view("MID")
	if len(v.Relations) != 1 || v.Relations[0].State != Cancelled || v.Relations[0].Holds {
		t.Fatalf("edges %+v", v.Relations)
	}
	// A validation failure propagates too.
	l.open("V", parserSlots())
	l.create("VDEP", []string{"V"}, nil)
	l.publish("V", "A", "change", 1)
	l.respond("V", "T1", 1, map[string]string{"change": "A"})
	evs = l.verdict(maintainer, "V", "review", "A", Fail)
	if evs[len(evs)-1].Type != TypeDependency {
		t.Fatalf("verdict batch %v", evs)
	}
	l.expect("VDEP", DependencyFailed)
}

func TestDeadlockVictimIsLowestCreationSequence(t *testing.T) {
	l := newLedger(t)
	l.create("Y", nil, []string{"X"})
	l.do(maintainer, Create{Claim: "X", Respondent: parser, Work: "w", Awaits: []string{"Y"}, Deadline: t0.Add(time.Hour)})
	l.create("Z", []string{"Y"}, nil)
	l.done("X")
	l.done("Y")
	l.now = t0.Add(2 * time.Hour)
	evs := l.do(timekeeperActor, CommitDeadline{Claim: "X"})
	if evs[0].Type != TypeDeadlock || evs[0].Claim != "Y" || fmt.Sprint(evs[0].Members) != "[X Y]" {
		t.Fatalf("deadlock batch %v", evs)
	}
	l.expect("Y", Deadlocked)
	l.expect("Z", DependencyFailed) // Y's DependsOn dependents fail with it
	l.expect("X", Satisfied)        // the wait is released
}

// naiveGraph recomputes the graph from scratch by full sweeps: failed is
// the closure of the roots over DependsOn; satisfied the least fixpoint of
// local ∧ DependsOn satisfied ∧ Awaits terminal.
func naiveGraph(n int, deps, awaits [][]int, local, root []bool) (sat, failed []bool) {
	sat, failed = make([]bool, n), make([]bool, n)
	copy(failed, root)
	for changed := true; changed; {
		changed = false
		for i := 0; i < n; i++ {
			if failed[i] {
				continue
			}
			for _, d := range deps[i] {
				if failed[d] {
					failed[i], changed = true, true
					break
				}
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for i := 0; i < n; i++ {
			if sat[i] || failed[i] || !local[i] {
				continue
			}
			ok := true
			for _, d := range deps[i] {
				ok = ok && sat[d]
			}
			for _, a := range awaits[i] {
				ok = ok && (sat[a] || failed[a])
			}
			if ok {
				sat[i], changed = true, true
			}
		}
	}
	return sat, failed
}

func TestQuickCheckGraphAgainstNaiveFixpoint(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for round := 0; round < 200; round++ {
		n := 2 + rng.Intn(10)
		deps, awaits := make([][]int, n), make([][]int, n)
		local, root := make([]bool, n), make([]bool, n)
		id := func(i int) string { return fmt.Sprintf("N%d", i) }
		for i := 0; i < n; i++ {
			seen := map[int]bool{}
			for k := rng.Intn(3); k > 0; k-- {
				d := rng.Intn(n)
				if !seen[d] {
					seen[d] = true
					if rng.Intn(2) == 0 {
						deps[i] = append(deps[i], d)
					} else {
						awaits[i] = append(awaits[i], d)
					}
				}
			}
			local[i] = rng.Intn(3) > 0
			root[i] = rng.Intn(6) == 0
		}
		l := newLedger(t)
		names := func(is []int) []string {
			var out []string
			for _, i := range is {
				out = append(out, id(i))
			}
			return out
		}
		for _, i := range rng.Perm(n) {
			l.create(id(i), names(deps[i]), names(awaits[i]))
		}
		for _, i := range rng.Perm(n) {
			if root[i] {
				if l.s.claims[id(i)].status().Terminal() {
					root[i] = false // failed already through a dependency
					continue
				}
				l.do(maintainer, Cancel{Claim: id(i), Reason: "root"})
			}
		}
		for _, i := range rng.Perm(n) {
			if local[i] && !l.s.claims[id(i)].status().Terminal() {
				l.done(id(i))
			}
		}
		sat, failed := naiveGraph(n, deps, awaits, local, root)
		for i := 0; i < n; i++ {
			got := l.state(id(i))
			want := "open"
			switch {
			case root[i]:
				want = string(Cancelled)
			case failed[i]:
				want = string(DependencyFailed)
			case sat[i]:
				want = string(Satisfied)
			}
			if (want == "open" && got.Terminal()) || (want != "open" && string(got) != want) {
				t.Fatalf("round %d: %s is %s, naive says %s\ndeps %v awaits %v local %v root %v", round, id(i), got, want, deps, awaits, local, root)
			}
		}
		if allViews(l.replay(), l.now) != allViews(l.s, l.now) {
			t.Fatalf("round %d: replay differs", round)
		}
	}
}
