package liveness

import (
	"testing"
	"time"
)

func TestHealthBoundsAndMultiplier(t *testing.T) {
	// Every score, reached by misses from healthy, and what it stretches
	// the seed's 300 ms base to (900 ms at 8).
	want := []string{"300ms", "375ms", "450ms", "525ms", "600ms", "675ms", "750ms", "825ms", "900ms"}
	var h Health
	for s := HealthMin; s <= HealthMax; s++ {
		if h.Score() != s {
			t.Fatalf("after %d misses: score %d", s, h.Score())
		}
		if got, m := h.Scale(300*time.Millisecond).String(), 1+0.25*float64(s); got != want[s] || h.Multiplier() != m {
			t.Errorf("score %d: scale %s multiplier %v, want %s %v", s, got, h.Multiplier(), want[s], m)
		}
		h = h.Missed()
	}
	if h.Score() != HealthMax || h.Late().Score() != HealthMax || h.Apply(5).Score() != HealthMax {
		t.Errorf("past the top: %d", h.Score())
	}
	if h.Multiplier() != 3 {
		t.Errorf("worst multiplier %v, want 3", h.Multiplier())
	}
	for range HealthMax {
		h = h.Answered()
	}
	if h.Score() != HealthMin || h.Answered().Score() != HealthMin || h.Apply(-9).Score() != HealthMin || h.Multiplier() != 1 {
		t.Errorf("past the bottom: %d, multiplier %v", h.Answered().Score(), h.Multiplier())
	}
}

func TestLateTick(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		gap  time.Duration
		late bool
	}{{time.Second, false}, {1500 * time.Millisecond, false}, {1501 * time.Millisecond, true}, {3 * time.Second, true}} {
		if got := LateTick(t0, t0.Add(c.gap), time.Second); got != c.late {
			t.Errorf("gap %v: late %v, want %v", c.gap, got, c.late)
		}
	}
}

func TestProbeDeadlineClamp(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	worst := Health{}.Apply(HealthMax)
	for _, c := range []struct {
		name string
		e    Estimate
		h    Health
		want string
	}{
		{"sparse: the conservative default", Estimate{}, Health{}, "2s"},
		{"sparse, slow observer", Estimate{}, worst, "6s"},
		{"the seed's nearby peer: 3×(20.7+9.5) ms under the floor", Estimate{RTT: ms(20.7), Margin: ms(9.5), Valid: true}, Health{}, "300ms"},
		{"zero", Estimate{Valid: true}, Health{}, "300ms"},
		{"just at the floor", Estimate{RTT: 100 * time.Millisecond, Valid: true}, Health{}, "300ms"},
		{"between", Estimate{RTT: 200 * time.Millisecond, Margin: 10 * time.Millisecond, Valid: true}, Health{}, "630ms"},
		{"just at the ceiling", Estimate{RTT: ms(600), Margin: ms(66.666666667), Valid: true}, Health{}, "2s"},
		{"over the ceiling", Estimate{RTT: time.Second, Valid: true}, Health{}, "2s"},
		{"floor, slow observer", Estimate{Valid: true}, worst, "900ms"},
		{"ceiling, slow observer", Estimate{RTT: time.Second, Valid: true}, worst, "6s"},
		{"between, score 4", Estimate{RTT: 200 * time.Millisecond, Margin: 10 * time.Millisecond, Valid: true}, Health{}.Apply(4), "1.26s"},
	} {
		if got := ProbeDeadline(c.e, c.h).Round(time.Millisecond).String(); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}
