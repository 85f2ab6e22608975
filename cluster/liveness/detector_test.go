package liveness

import (
	"fmt"
	"testing"
	"time"
)

// TestDetectorLifecycle follows member 2 through the deciding observer's
// table (observer 1, members 1, 2, 3, 4): never answered, answered,
// accused, confirmed, granted homework, settled dead, refuted.
func TestDetectorLifecycle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2, 3, 4})
	row := func() string {
		p, _ := d.Peer(2)
		s := fmt.Sprintf("%s inc=%d grants=%d", p.State, p.Incarnation, p.GrantsUsed)
		if !p.Deadline.IsZero() {
			s += fmt.Sprintf(" deadline=+%v confirmations=%d", p.Deadline.Sub(t0), p.Confirmations)
		}
		return s
	}
	step := func(name, got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %s, want %s", name, got, want)
		}
	}
	step("accuse a member never heard", string(d.Accuse(2, 0, 1, 4, at(0))), "never_answered")
	step("accuse a stranger", string(d.Accuse(7, 0, 1, 4, at(0))), "unknown")
	h := d.Hear(2, 1, 10, Load{}, at(0))
	step("first report", fmt.Sprintf("%+v %s", h, row()), "{Stale:false Refuted:false Homework:<nil> State:alive} alive inc=1 grants=0")
	step("a report of an older incarnation", fmt.Sprint(d.Hear(2, 0, 50, Load{}, at(0)).Stale), "true")
	step("accuse at an older incarnation", string(d.Accuse(2, 0, 1, 4, at(0))), "stale")
	// n = 4: K = 2, 3 s to 18 s.
	step("accused", string(d.Accuse(2, 1, 1, 4, at(1000))), "started")
	step("suspect", row(), "suspect inc=1 grants=0 deadline=+19s confirmations=0")
	step("the accuser again", string(d.Accuse(2, 1, 1, 4, at(1500))), "ignored")
	step("confirmed", string(d.Accuse(2, 1, 3, 4, at(1600))), "confirmed")
	step("the same confirmation again", string(d.Accuse(2, 1, 3, 4, at(1700))), "ignored")
	step("after one", row(), "suspect inc=1 grants=0 deadline=+9.536053697s confirmations=1")
	step("nothing expires early", fmt.Sprint(d.Expire(at(8000))), "[]")
	h = d.Hear(2, 1, 10, Load{}, at(2000))
	step("homework, witness unchanged", fmt.Sprintf("%s %s", h.Homework.Denial, row()), "witness_unchanged suspect inc=1 grants=0 deadline=+9.536053697s confirmations=1")
	h = d.Hear(2, 1, 11, Load{}, at(2100))
	step("homework granted", fmt.Sprintf("%v %s", h.Homework.Grant, row()), "3.12s suspect inc=1 grants=1 deadline=+12.656053697s confirmations=1")
	h = d.Hear(2, 1, 12, Load{}, at(2200))
	step("homework too soon", fmt.Sprintf("%s %s", h.Homework.Denial, row()), "too_soon suspect inc=1 grants=1 deadline=+12.656053697s confirmations=1")
	h = d.Hear(2, 1, 12, Load{MemoryUsed: 10, MemoryLimit: 10}, at(3200))
	step("homework overloaded", string(h.Homework.Denial), "overloaded")
	step("confirmed by the last one", string(d.Accuse(2, 1, 4, 4, at(3300))), "confirmed")
	step("after two", row(), "suspect inc=1 grants=1 deadline=+7.12s confirmations=2")
	step("not yet", fmt.Sprint(d.Expire(at(7119))), "[]")
	step("settled", fmt.Sprint(d.Expire(at(7120))), "[{2 1}]")
	step("dead", row(), "dead inc=1 grants=1")
	step("settled once", fmt.Sprint(d.Expire(at(9000))), "[]")
	step("accused when dead", string(d.Accuse(2, 1, 3, 4, at(9000))), "ignored")
	h = d.Hear(2, 1, 20, Load{}, at(9000))
	step("dead at the same incarnation", fmt.Sprintf("%s %s", h.Homework.Denial, row()), "not_suspected dead inc=1 grants=1")
	step("dead, accused at a higher incarnation gossip knows", string(d.Accuse(2, 2, 3, 4, at(9050))), "ignored")
	step("still dead at the settled one", row(), "dead inc=1 grants=1")
	h = d.Hear(2, 2, 20, Load{}, at(9100))
	step("refuted", fmt.Sprintf("%v %s", h.Refuted, row()), "true alive inc=2 grants=0")
}

func TestDetectorGraceWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2, 3})
	d.Hear(2, 1, 1, Load{}, t0)
	d.Accuse(2, 1, 1, 3, t0)
	if h := d.Hear(2, 1, 2, Load{}, t0.Add(time.Second)); h.Homework.Denial != Granted {
		t.Fatalf("homework: %+v", h.Homework)
	}
	// Refuted: the grant's grace window still holds off the next suspicion.
	d.Hear(2, 2, 3, Load{}, t0.Add(1500*time.Millisecond))
	for _, c := range []struct {
		ms   int
		want Accused
	}{{2000, AccuseGrace}, {4119, AccuseGrace}, {4120, AccuseStarted}} {
		if got := d.Accuse(2, 2, 3, 3, t0.Add(time.Duration(c.ms)*time.Millisecond)); got != c.want {
			t.Errorf("+%dms: %s, want %s", c.ms, got, c.want)
		}
	}
}

func TestDetectorSuspicionScaledByObserverHealth(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2})
	d.Hear(2, 1, 1, Load{}, t0)
	d.SetHealth(Health{}.Apply(HealthMax))
	d.Accuse(2, 1, 1, 2, t0)
	if p, _ := d.Peer(2); p.Deadline.Sub(t0) != 9*time.Second {
		t.Fatalf("deadline +%v, want +9s (3 s × 3)", p.Deadline.Sub(t0))
	}
}

func TestDetectorSettleAndMembers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2, 3})
	// A new decider may suspect a member settled before it heard it.
	d.Settle(3, 1, Alive)
	if got := d.Accuse(3, 1, 2, 3, t0); got != AccuseStarted {
		t.Fatalf("accusing a settled member: %s", got)
	}
	d.Hear(2, 3, 1, Load{}, t0)
	d.Settle(2, 2, Dead) // older: ignored
	if p, _ := d.Peer(2); p.State != Alive || p.Incarnation != 3 {
		t.Fatalf("older settle applied: %+v", p)
	}
	d.Settle(2, 3, Dead) // an operator's mark-dead at the known incarnation
	if p, _ := d.Peer(2); p.State != Dead {
		t.Fatalf("mark-dead not applied: %+v", p)
	}
	d.Settle(2, 3, Alive) // a dead member comes back only at a higher incarnation
	if p, _ := d.Peer(2); p.State != Dead {
		t.Fatalf("alive at the same incarnation applied: %+v", p)
	}
	d.Settle(2, 4, Alive)
	if p, _ := d.Peer(2); p.State != Alive || p.Incarnation != 4 {
		t.Fatalf("higher alive not applied: %+v", p)
	}
	d.Members([]uint64{1, 3})
	if _, ok := d.Peer(2); ok || len(d.Peers()) != 1 {
		t.Fatalf("removed member kept: %+v", d.Peers())
	}
}

func TestDetectorStalledObserverMovesDeadlines(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2})
	d.Hear(2, 1, 1, Load{}, t0)
	d.Accuse(2, 1, 1, 2, t0) // n = 2: the shortest, 3 s
	d.Stalled(10 * time.Second)
	if v := d.Expire(t0.Add(12 * time.Second)); len(v) != 0 {
		t.Fatalf("settled while the observer was stalled: %v", v)
	}
	if v := d.Expire(t0.Add(13 * time.Second)); len(v) != 1 {
		t.Fatalf("not settled after the moved deadline: %v", v)
	}
}

// A member the table never heard, which an accuser vouches answered it
// (stopped before its first report reached this decider), is suspected
// and settled dead at the incarnation the accusation names.
func TestDetectorAnsweredElsewhere(t *testing.T) {
	t0 := time.Unix(1000, 0)
	d := NewDetector(1, ProbePeriod)
	d.Members([]uint64{1, 2, 3})
	if got := d.Accuse(2, 1, 3, 3, t0); got != AccuseNeverHeard {
		t.Fatalf("accused before anyone vouched: %s", got)
	}
	d.Answered(2)
	d.Answered(9) // not a member: nothing
	if got := d.Accuse(2, 1, 3, 3, t0); got != AccuseStarted {
		t.Fatalf("accused once vouched for: %s", got)
	}
	// n = 3, unconfirmed: the longest, 18 s.
	if v := fmt.Sprint(d.Expire(t0.Add(18 * time.Second))); v != "[{2 1}]" {
		t.Fatalf("settled %s, want [{2 1}]", v)
	}
	if _, ok := d.Peer(9); ok {
		t.Fatal("a stranger vouched for became a member")
	}
}
