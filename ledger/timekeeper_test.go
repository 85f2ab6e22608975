package ledger

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/internal/fsyncbench"
	"tally/refuse"
)

// settable is a ledger clock a test moves.
type settable struct {
	mu sync.Mutex
	t  time.Time
}

func (s *settable) now() time.Time  { s.mu.Lock(); defer s.mu.Unlock(); return s.t }
func (s *settable) set(t time.Time) { s.mu.Lock(); s.t = t; s.mu.Unlock() }

func clockConfig(c *settable) Config {
	cfg := DefaultConfig()
	cfg.Now = c.now
	return cfg
}

func claimState(l *Ledger, id string, now time.Time) claim.Status {
	var st claim.Status
	l.Read(func(s *State) {
		if v, ok := s.Claims.Claim(id, now); ok {
			st = v.State
		}
	})
	return st
}

func TestSweepClaimsCommitsExpired(t *testing.T) {
	clk := &settable{t: t0}
	l := open(t, t.TempDir(), clockConfig(clk))
	ctx := context.Background()
	if _, err := l.SubmitClaim(ctx, claim.Create{Claim: "C1", Respondent: "parser", Work: "w", Deadline: t0.Add(time.Hour)}, WriteOptions{Actor: "maintainer"}); err != nil {
		t.Fatal(err)
	}
	if res, err := l.SweepClaims(ctx, 100); err != nil || len(res) != 0 {
		t.Fatalf("before the deadline: %v %v", res, err)
	}
	clk.set(t0.Add(2 * time.Hour))
	res, err := l.SweepClaims(ctx, 100)
	if err != nil || len(res) != 1 || res[0].Type != claim.TypeDeadline {
		t.Fatalf("after the deadline: %v %v", res, err)
	}
	if st := claimState(l, "C1", clk.now()); st != claim.Expired {
		t.Fatalf("C1 is %s", st)
	}
	if res, err := l.SweepClaims(ctx, 100); err != nil || len(res) != 0 {
		t.Fatalf("second sweep: %v %v", res, err)
	}
}

func TestSweepClaimsDeadlocksTheCanonicalVictim(t *testing.T) {
	clk := &settable{t: t0}
	dir := t.TempDir()
	l := open(t, dir, clockConfig(clk))
	ctx := context.Background()
	m := WriteOptions{Actor: "maintainer"}
	// Y first (lower creation sequence), each awaiting the other.
	for _, c := range []claim.Create{
		{Claim: "Y", Respondent: "parser", Work: "w", Awaits: []string{"X"}, Deadline: t0.Add(2 * time.Hour)},
		{Claim: "X", Respondent: "parser", Work: "w", Awaits: []string{"Y"}, Deadline: t0.Add(time.Hour)},
	} {
		if _, err := l.SubmitClaim(ctx, c, m); err != nil {
			t.Fatal(err)
		}
	}
	clk.set(t0.Add(3 * time.Hour))
	// Two ledgers (two timekeepers) sweep at once: one victim, recorded once.
	l2 := open(t, dir, clockConfig(clk))
	var wg sync.WaitGroup
	results := make([][]Result, 2)
	for i, lg := range []*Ledger{l, l2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				res, err := lg.SweepClaims(ctx, 100)
				if err != nil {
					t.Error(err)
				}
				results[i] = append(results[i], res...)
			}
		}()
	}
	wg.Wait()
	if err := l.Refresh(); err != nil {
		t.Fatal(err)
	}
	deadlocks := 0
	for _, rs := range results {
		for _, r := range rs {
			if r.Type == claim.TypeDeadlock {
				deadlocks++
			}
		}
	}
	if deadlocks != 1 {
		t.Fatalf("%d deadlock facts: %v", deadlocks, results)
	}
	if st := claimState(l, "Y", clk.now()); st != claim.Deadlocked {
		t.Fatalf("Y is %s, want the victim Deadlocked", st)
	}
	if st := claimState(l, "X", clk.now()); st == claim.Deadlocked {
		t.Fatalf("X is %s: only one victim", st)
	}
}

func TestOnlyTheTimekeeperCommitsLapses(t *testing.T) {
	clk := &settable{t: t0}
	l := open(t, t.TempDir(), clockConfig(clk))
	ctx := context.Background()
	r := expect.Raise{ExpectationID: "e1", Kind: "k", Subject: expect.Subject{Type: "s", ID: "1"}, FactKey: "f", DueAt: t0.Add(time.Hour), Basis: expect.BasisDeclared}
	if _, err := l.SubmitExpect(ctx, expect.RaiseCommand{Raise: r}, false, WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2 * time.Hour))
	for _, actor := range []string{"agent", "someone", "watch"} {
		_, err := l.SubmitExpect(ctx, expect.LapseCommand{ExpectationID: "e1", Kind: expect.LapseOverdue}, true, WriteOptions{Actor: actor})
		if rf, ok := refuse.As(err); !ok || rf.Code != refuse.Forbidden {
			t.Fatalf("lapse as %s: %v", actor, err)
		}
	}
	res, err := l.SubmitExpect(ctx, expect.LapseCommand{ExpectationID: "e1", Kind: expect.LapseOverdue}, false, WriteOptions{Actor: l.Timekeeper()})
	if err != nil || len(res) != 1 {
		t.Fatalf("as the timekeeper: %v %v", res, err)
	}
	if res, err := l.Sweep(ctx, 0); err != nil || len(res) != 0 {
		t.Fatalf("sweep after: %v %v", res, err)
	}
}

// BenchmarkSweepLapsesVsGroupCommit: committing 10,000 due lapses in one
// sweep against the core's group-commit append rate (ledger.Submit from 64
// goroutines), measured in the same run. Goal: ratio ≥ 0.5.
func BenchmarkSweepLapsesVsGroupCommit(b *testing.B) {
	const due, writers = 10_000, 64
	ctx := context.Background()
	var sweepTime, groupTime time.Duration
	var sweepOps, groupOps int
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		clk := &settable{t: benchEpoch}
		cfg := benchConfig()
		cfg.Now = clk.now
		l, err := Open(filepath.Join(fsyncbench.Dir(b), "session"), cfg)
		if err != nil {
			b.Fatal(err)
		}
		// 10,000 open expectations, raised by 64 writers (group commit).
		var wg sync.WaitGroup
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < due; k += writers {
					r := expect.Raise{ExpectationID: fmt.Sprint("exp-", k), Kind: "shipment.arrival",
						Subject: expect.Subject{Type: "shipment", ID: fmt.Sprint("S", k)}, FactKey: fmt.Sprint("arrived:", k),
						DueAt: benchEpoch.Add(time.Hour), Grace: time.Hour, Basis: expect.BasisObserved}
					if _, err := l.SubmitExpect(ctx, expect.RaiseCommand{Raise: r}, false, WriteOptions{Actor: "agent://booking"}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		clk.set(benchEpoch.Add(3 * time.Hour))
		b.StartTimer()

		start := time.Now()
		res, err := l.Sweep(ctx, due)
		sweepTime += time.Since(start)
		if err != nil || len(res) != due {
			b.Fatalf("sweep committed %d lapses: %v", len(res), err)
		}
		sweepOps += len(res)

		per := due / writers
		start = time.Now()
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := rand.New(rand.NewPCG(uint64(w), uint64(i)))
				for k := 0; k < per; k++ {
					cmd, actor := benchDeclare(r, k)
					if _, err := l.Submit(ctx, cmd, WriteOptions{Actor: actor}); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		groupTime += time.Since(start)
		groupOps += per * writers
		b.StopTimer()
		l.Close()
	}
	sweep, group := float64(sweepOps)/sweepTime.Seconds(), float64(groupOps)/groupTime.Seconds()
	b.ReportMetric(sweep, "lapses/s")
	b.ReportMetric(group, "64way_appends/s")
	b.ReportMetric(sweep/group, "x_group_commit")
}
