package liveness

import (
	"fmt"
	"testing"
	"time"
)

// simulate runs rounds of probes among nodes whose true round trips are
// rtt(a, b): each node probes every other each round and learns from the
// ack (which carries the other's coordinate), as the gossip layer does.
func simulate(t *testing.T, names []string, rtt func(a, b string) time.Duration, rounds int) map[string]*Vivaldi {
	t.Helper()
	vs := map[string]*Vivaldi{}
	for _, n := range names {
		vs[n] = NewVivaldi()
	}
	// One probe per node per round, to a peer in turn (as SWIM's
	// round-robin does), so no pair's updates come all at once.
	for r := range rounds {
		for i, a := range names {
			b := names[(i+1+r%(len(names)-1))%len(names)]
			if err := vs[a].Observe(b, vs[b].Coordinate(), rtt(a, b)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return vs
}

func within(got, want time.Duration, frac float64) bool {
	d := got - want
	return d >= -time.Duration(frac*float64(want)) && d <= time.Duration(frac*float64(want))
}

func TestVivaldiTriangle(t *testing.T) {
	// A–B 10 ms, B–C 40 ms, A–C 80 ms (not a metric: 10 + 40 < 80, as
	// real routes are not), so the fit is approximate; the order of the
	// predictions and the deadlines must follow.
	ms := time.Millisecond
	true_ := map[[2]string]time.Duration{{"A", "B"}: 10 * ms, {"B", "C"}: 40 * ms, {"A", "C"}: 80 * ms}
	rtt := func(a, b string) time.Duration {
		if d, ok := true_[[2]string{a, b}]; ok {
			return d
		}
		return true_[[2]string{b, a}]
	}
	vs := simulate(t, []string{"A", "B", "C"}, rtt, 1000)
	est := func(a, b string) Estimate { return vs[a].Estimate(b, vs[b].Coordinate()) }
	ab, bc, ac := est("A", "B"), est("B", "C"), est("A", "C")
	for _, e := range []Estimate{ab, bc, ac} {
		if !e.Valid {
			t.Fatalf("not converged: %+v %+v %+v", ab, bc, ac)
		}
	}
	if !(ab.RTT < bc.RTT && bc.RTT < ac.RTT) {
		t.Fatalf("predictions out of order: AB %v BC %v AC %v", ab.RTT, bc.RTT, ac.RTT)
	}
	if !within(ab.RTT, 10*ms, 0.6) || !within(bc.RTT, 40*ms, 0.35) || !within(ac.RTT, 80*ms, 0.35) {
		t.Errorf("predictions far from the truth: AB %v BC %v AC %v", ab.RTT, bc.RTT, ac.RTT)
	}
	// The near pairs sit at the floor; no deadline is over the ceiling.
	if d := ProbeDeadline(ab, Health{}); d != ProbeDeadlineMin {
		t.Errorf("AB deadline %v, want the floor", d)
	}
	if d := ProbeDeadline(ac, Health{}); d < ProbeDeadline(ab, Health{}) || d > ProbeDeadlineMax {
		t.Errorf("AC deadline %v", d)
	}
}

func TestVivaldiStar(t *testing.T) {
	// A hub H and spokes at 20, 50, 150 and 300 ms; between spokes the sum
	// (every route goes through the hub).
	ms := time.Millisecond
	spoke := map[string]time.Duration{"H": 0, "a": 20 * ms, "b": 50 * ms, "c": 150 * ms, "d": 300 * ms}
	rtt := func(x, y string) time.Duration { return spoke[x] + spoke[y] }
	names := []string{"H", "a", "b", "c", "d"}
	vs := simulate(t, names, rtt, 2000)
	var got []string
	for _, pair := range [][2]string{{"H", "a"}, {"H", "b"}, {"H", "c"}, {"a", "b"}, {"a", "c"}, {"H", "d"}, {"c", "d"}} {
		x, y := pair[0], pair[1]
		e := vs[x].Estimate(y, vs[y].Coordinate())
		want := rtt(x, y)
		if !e.Valid || (!within(e.RTT, want, 0.3) && (e.RTT-want).Abs() > 15*ms) {
			t.Errorf("%s–%s: predicted %v (valid %v), true %v", x, y, e.RTT, e.Valid, want)
		}
		// The deadline follows the truth's own deadline, within the
		// margin's allowance.
		d, ideal := ProbeDeadline(e, Health{}), ProbeDeadline(Estimate{RTT: want, Valid: true}, Health{})
		if d < ideal*3/4 || d > min(ProbeDeadlineMax, ideal*8/5) {
			t.Errorf("%s–%s: deadline %v, from the true rtt %v", x, y, d, ideal)
		}
		got = append(got, fmt.Sprintf("%s-%s:%v", x, y, d.Round(100*ms)))
	}
	t.Log(got)
	// The far pair (450 ms) waits at least 3 × 450 ms.
	if d := ProbeDeadline(vs["c"].Estimate("d", vs["d"].Coordinate()), Health{}); d < 1350*ms*3/4 || d > ProbeDeadlineMax {
		t.Errorf("c–d deadline %v, want about 1.35 s to 2 s", d)
	}
	// A slow observer stretches them all.
	ha := vs["H"].Estimate("a", vs["a"].Coordinate())
	if d, slow := ProbeDeadline(ha, Health{}), ProbeDeadline(ha, Health{}.Apply(HealthMax)); slow != 3*d {
		t.Errorf("slow H–a deadline %v, healthy %v", slow, d)
	}
}

func TestVivaldiSparseIsConservative(t *testing.T) {
	a, b := NewVivaldi(), NewVivaldi()
	if e := a.Estimate("b", b.Coordinate()); e.Valid || ProbeDeadline(e, Health{}) != ProbeDeadlineMax {
		t.Fatalf("fresh: %+v", e)
	}
	for i := range SamplesMin - 1 {
		if err := a.Observe("b", b.Coordinate(), 5*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		if e := a.Estimate("b", b.Coordinate()); e.Valid {
			t.Fatalf("valid after %d samples: %+v", i+1, e)
		}
	}
	if e := a.Estimate("b", nil); e.Valid {
		t.Fatalf("no coordinate: %+v", e)
	}
	bad := b.Coordinate()
	bad.Vec = bad.Vec[:2]
	if e := a.Estimate("b", bad); e.Valid {
		t.Fatalf("incompatible coordinate: %+v", e)
	}
	if err := a.Observe("b", b.Coordinate(), -time.Second); err == nil {
		t.Fatal("a negative rtt was taken")
	}
	a.Forget("b")
	if e := a.Estimate("b", b.Coordinate()); e.Valid {
		t.Fatalf("forgotten peer: %+v", e)
	}
}
