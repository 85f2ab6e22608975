package claim

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// cancel ends a claim unless it already ended (a DependsOn failure may
// have ended it as DependencyFailed).
func (l *ledger) cancel(id string) {
	l.t.Helper()
	if l.s.claims[id].end != nil {
		return
	}
	l.do(maintainer, Cancel{Claim: id, Reason: "stopped"})
}

func (l *ledger) scope(id string) ScopeView {
	l.t.Helper()
	v := l.view(id)
	if v.ScopeReleased != v.ScopeRelease.Released {
		l.t.Fatalf("%s: scope_released %v but scope_release %+v", id, v.ScopeReleased, v.ScopeRelease)
	}
	return v.ScopeRelease
}

// The seed's migration: stopping the parent leaves its child work and its
// wait to be accounted for; it releases its scope only once the wait is
// settled (here: cancelled) and every child released its own.
func TestScopeReleaseMigration(t *testing.T) {
	l := newLedger(t)
	l.create("TESTS", nil, nil)
	l.create("COMPAT", nil, nil)
	l.create("CONSULT", nil, nil)
	l.create("MIGRATE", []string{"TESTS", "COMPAT"}, []string{"CONSULT"})

	sv := l.scope("MIGRATE")
	if sv.Released || !strings.Contains(sv.Reason, "open") {
		t.Fatalf("open parent: %+v", sv)
	}
	l.cancel("MIGRATE") // the parent becomes terminal; its scope stays held
	sv = l.scope("MIGRATE")
	if sv.Released || !reflect.DeepEqual(sv.Waits, []string{"CONSULT"}) || !reflect.DeepEqual(sv.Children, []string{"TESTS", "COMPAT"}) {
		t.Fatalf("stopped parent: %+v", sv)
	}
	if strings.Contains(sv.Reason, "open") || !strings.Contains(sv.Reason, "waiting on CONSULT") {
		t.Fatalf("reason: %q", sv.Reason)
	}

	l.done("TESTS") // Satisfied: a terminal leaf releases
	if sv := l.scope("TESTS"); !sv.Released || !strings.Contains(sv.Reason, "Satisfied") {
		t.Fatalf("satisfied leaf: %+v", sv)
	}
	l.cancel("CONSULT") // cancelling a wait ends it
	sv = l.scope("MIGRATE")
	if sv.Released || sv.Waits != nil || !reflect.DeepEqual(sv.Children, []string{"COMPAT"}) {
		t.Fatalf("after wait cancelled: %+v", sv)
	}
	l.cancel("COMPAT")
	sv = l.scope("MIGRATE")
	if !sv.Released || sv.Waits != nil || sv.Children != nil || !strings.Contains(sv.Reason, "every child released") {
		t.Fatalf("all settled: %+v", sv)
	}
	// Release is derived from committed states only: a replay agrees.
	if allViews(l.replay(), l.now) != allViews(l.s, l.now) {
		t.Fatal("replay differs")
	}
}

// A child releases only when its own children did (transitively), and an
// open claim never releases, even without waits or children.
func TestScopeReleaseIsTransitive(t *testing.T) {
	l := newLedger(t)
	l.create("G", nil, nil)
	l.create("C", []string{"G"}, nil)
	l.create("P", []string{"C"}, nil)
	l.cancel("P")
	l.cancel("C")
	if sv := l.scope("P"); sv.Released || !reflect.DeepEqual(sv.Children, []string{"C"}) {
		t.Fatalf("grandchild open: %+v", sv)
	}
	if sv := l.scope("G"); sv.Released {
		t.Fatalf("open leaf released: %+v", sv)
	}
	l.cancel("G")
	if sv := l.scope("P"); !sv.Released {
		t.Fatalf("all terminal: %+v", sv)
	}
}

// A settled cycle releases (nothing under it is unfinished); a cycle with
// an unsettled member holds every claim on or above it; an unknown wait or
// child holds the release back.
func TestScopeReleaseCyclesAndUnknown(t *testing.T) {
	l := newLedger(t)
	l.create("A", []string{"B"}, nil)
	l.create("B", []string{"A"}, nil)
	l.create("SELF", []string{"SELF"}, nil)
	l.create("X", []string{"A"}, nil)
	l.create("OPEN", nil, nil)
	l.create("C1", []string{"C2"}, nil)
	l.create("C2", []string{"C1"}, []string{"OPEN"})
	l.create("Y", []string{"C1"}, nil)
	l.create("U", []string{"NOPE"}, nil)
	l.create("V", nil, []string{"NOPE"})
	for _, id := range []string{"A", "B", "SELF", "X", "C1", "C2", "Y", "U", "V"} {
		l.cancel(id)
	}
	for id, want := range map[string]bool{"A": true, "B": true, "SELF": true, "X": true,
		"C1": false, "C2": false, "Y": false, "U": false, "V": false} {
		if sv := l.scope(id); sv.Released != want {
			t.Errorf("%s: released %v, want %v (%+v)", id, sv.Released, want, sv)
		}
	}
	if sv := l.scope("V"); !reflect.DeepEqual(sv.Waits, []string{"NOPE"}) {
		t.Fatalf("unknown wait: %+v", sv)
	}
	if sv := l.scope("C2"); !reflect.DeepEqual(sv.Waits, []string{"OPEN"}) || !reflect.DeepEqual(sv.Children, []string{"C1"}) {
		t.Fatalf("unsettled cycle: %+v", sv)
	}
}

// Random graphs against a naive greatest fixpoint: start from every claim
// released, withdraw the release of every claim whose premises fail, until
// nothing changes.
func TestScopeReleaseAgainstNaiveFixpoint(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewSource(seed))
		l := newLedger(t)
		n := 2 + rng.Intn(9)
		id := func(i int) string { return fmt.Sprintf("N%d", i) }
		pick := func() []string {
			var out []string
			seen := map[int]bool{}
			for k := rng.Intn(3); k > 0; k-- {
				if j := rng.Intn(n + 1); !seen[j] { // n: a claim that never exists
					seen[j] = true
					out = append(out, id(j))
				}
			}
			return out
		}
		for i := 0; i < n; i++ {
			l.create(id(i), pick(), pick())
		}
		for i := 0; i < n; i++ {
			if rng.Intn(4) != 0 {
				l.cancel(id(i))
			}
		}
		released := map[string]bool{}
		for i := 0; i < n; i++ {
			released[id(i)] = true
		}
		for changed := true; changed; {
			changed = false
			for i := 0; i < n; i++ {
				c := l.s.claims[id(i)]
				if !released[c.id] {
					continue
				}
				ok := c.end != nil
				for _, w := range c.terms.Awaits {
					if d := l.s.claims[w]; d == nil || d.end == nil {
						ok = false
					}
				}
				for _, ch := range c.terms.DependsOn {
					if !released[ch] {
						ok = false
					}
				}
				if !ok {
					released[c.id], changed = false, true
				}
			}
		}
		for i := 0; i < n; i++ {
			if got := l.scope(id(i)).Released; got != released[id(i)] {
				t.Fatalf("seed %d: %s released %v, naive fixpoint %v", seed, id(i), got, released[id(i)])
			}
		}
	}
}
