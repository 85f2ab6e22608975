package liveness

import (
	"testing"
	"time"
)

func TestSuspicionBounds(t *testing.T) {
	for _, c := range []struct {
		n      int
		lo, hi string
		k      int
	}{
		{1, "3s", "18s", 0}, {2, "3s", "18s", 0}, {3, "3s", "18s", 1}, {5, "3s", "18s", 3},
		{9, "3s", "18s", 3}, {19, "3.903089986s", "23.418539916s", 3}, {99, "6s", "36s", 3},
	} {
		lo, hi := SuspicionBounds(c.n, ProbePeriod)
		if lo.String() != c.lo || hi.String() != c.hi || Confirmations(c.n) != c.k {
			t.Errorf("n=%d: %v..%v k=%d, want %s..%s k=%d", c.n, lo, hi, Confirmations(c.n), c.lo, c.hi, c.k)
		}
	}
}

func TestSuspicionDeadlineAgainstConfirmations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// n = 5: K = 3, 3 s to 18 s; each independent confirmation shortens it.
	want := []string{"18s", "10.5s", "6.112781245s", "3s"}
	s := NewSuspicion(9, 4, 1, t0, 5, ProbePeriod, Health{})
	for c, w := range want {
		if got := s.Timeout().String(); got != w || s.Confirmed() != c {
			t.Fatalf("after %d confirmations: %s (%d counted), want %s", c, got, s.Confirmed(), w)
		}
		if got := s.Deadline(); !got.Equal(t0.Add(s.Timeout())) {
			t.Fatalf("deadline %v is not start + timeout", got)
		}
		if c < 3 && !s.Confirm(uint64(10+c)) {
			t.Fatalf("confirmation %d not counted", c+1)
		}
	}
	// Past K, the accuser's own vote, the suspect's, and repeated evidence:
	// none is counted and none moves the deadline.
	before := s.Deadline()
	for _, from := range []uint64{13, 1, 9, 10, 11, 12} {
		if s.Confirm(from) {
			t.Errorf("confirmation by %d counted", from)
		}
	}
	if !s.Deadline().Equal(before) {
		t.Errorf("deadline moved: %v, was %v", s.Deadline(), before)
	}
}

func TestSuspicionRepeatedEvidenceNeverRestarts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewSuspicion(9, 4, 1, t0, 5, ProbePeriod, Health{})
	d0 := s.Deadline()
	for range 10 {
		s.Confirm(1)
	}
	if !s.Deadline().Equal(d0) || !s.Start.Equal(t0) {
		t.Fatalf("the accuser's repeated evidence moved the deadline: %v, was %v", s.Deadline(), d0)
	}
	s.Confirm(2)
	d1 := s.Deadline()
	for range 10 {
		s.Confirm(2)
	}
	if !s.Deadline().Equal(d1) || !d1.Before(d0) {
		t.Fatalf("repeated confirmation moved the deadline: %v, was %v (first %v)", s.Deadline(), d1, d0)
	}
}

func TestSuspicionScaledAndExtended(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		n     int
		score int
		grant time.Duration
		want  string
	}{
		{2, 0, 0, "3s"}, // no one to confirm: the shortest
		{2, 8, 0, "9s"},
		{3, 0, 0, "18s"},
		{3, 4, 0, "36s"},
		{3, 8, 0, "54s"},
		{3, 0, GrantBase, "21.12s"},
		{2, 0, GrantBase + GrantBase/2, "7.68s"},
	} {
		s := NewSuspicion(9, 1, 1, t0, c.n, ProbePeriod, Health{}.Apply(c.score))
		if c.grant > 0 {
			s.Extend(c.grant)
		}
		if got := s.Deadline().Sub(t0).String(); got != c.want {
			t.Errorf("n=%d score=%d grant=%v: %s, want %s", c.n, c.score, c.grant, got, c.want)
		}
	}
	// n = 3: one confirmation takes it to the shortest.
	s := NewSuspicion(9, 1, 1, t0, 3, ProbePeriod, Health{})
	if !s.Confirm(2) || s.Timeout().String() != "3s" || s.Confirm(3) {
		t.Errorf("n=3 confirmed: %v", s.Timeout())
	}
}
