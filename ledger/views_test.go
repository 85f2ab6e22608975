package ledger

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"tally/claim"
	"tally/expect"
	"tally/promise"
)

// asJSON renders a view for comparison.
func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Each typed read answers what the same question asked of the state in
// Read does, for what exists and for what does not.
func TestTypedReadsAnswerAsTheState(t *testing.T) {
	clock := t0
	cfg := testConfig(t0)
	cfg.Now = func() time.Time { return clock }
	l := open(t, t.TempDir(), cfg)
	ctx := context.Background()
	if _, err := l.Submit(ctx, declare("p1", "d"), WriteOptions{Actor: "d"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.SubmitClaim(ctx, claimCreate("C1"), WriteOptions{Actor: "boss"}); err != nil {
		t.Fatal(err)
	}
	raise := expect.Raise{ExpectationID: "arrive", Kind: "shipment", Subject: expect.Subject{Type: "shipment", ID: "S1"},
		FactKey: "shipment.arrived", DueAt: t0.Add(time.Hour), Basis: "declared"}
	if _, err := l.SubmitExpect(ctx, expect.RaiseCommand{Raise: raise}, false, WriteOptions{Actor: "agent"}); err != nil {
		t.Fatal(err)
	}
	clock = t0.Add(2 * time.Hour)
	if res, err := l.Sweep(ctx, 0); err != nil || len(res) != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	now := clock
	var want [8]string
	l.Read(func(st *State) {
		p, _ := st.Promises.Get("p1")
		c, _ := st.Claims.Claim("C1", now)
		e, _ := st.Expects.Expectation("arrive")
		want = [8]string{
			asJSON(t, st.Promises.Select(promise.Filter{State: "all"}, now)),
			asJSON(t, st.Promises.View(p, now)),
			asJSON(t, st.Claims.List(claim.Filter{}, now)),
			asJSON(t, c),
			asJSON(t, st.Expects.List(expect.Filter{})),
			asJSON(t, e),
			asJSON(t, st.Expects.Lapses(time.Time{})),
			st.SkippedSummary(),
		}
	})
	pv, ok1 := l.Promise("p1", now)
	cv, ok2 := l.Claim("C1", now)
	ev, ok3 := l.Expectation("arrive")
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("found promise %v, claim %v, expectation %v", ok1, ok2, ok3)
	}
	got := [8]string{
		asJSON(t, l.Promises(promise.Filter{State: "all"}, now)),
		asJSON(t, pv),
		asJSON(t, l.Claims(claim.Filter{}, now)),
		asJSON(t, cv),
		asJSON(t, l.Expectations(expect.Filter{})),
		asJSON(t, ev),
		asJSON(t, l.Lapses(time.Time{})),
		l.SkippedSummary(),
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("read %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
	if len(l.Lapses(time.Time{})) != 1 || len(l.Promises(promise.Filter{State: "all"}, now)) != 1 {
		t.Fatal("the reads do not see the writes")
	}
	if _, ok := l.Promise("nope", now); ok {
		t.Error("a promise that does not exist was found")
	}
	if _, ok := l.Claim("nope", now); ok {
		t.Error("a claim that does not exist was found")
	}
	if _, ok := l.Expectation("nope"); ok {
		t.Error("an expectation that does not exist was found")
	}
}
