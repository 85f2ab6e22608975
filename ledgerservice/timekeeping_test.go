package ledgerservice

import (
	"context"
	"testing"
	"time"

	"tally/api"
	"tally/service"
)

// Timeline reads everything from the zero cursor, what the log gained
// after a cursor it continues, and everything again, marked Reset, from a
// cursor that does not continue the log.
func TestTimelineFollowsTheLog(t *testing.T) {
	svc, _ := newLocal(t)
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main", Actor: "alice"}
	declare := func(id string) {
		t.Helper()
		if _, err := svc.DeclarePromise(ctx, call, api.PromiseDeclare{ID: id, Promise: "ship " + id, To: "bob", Until: t0.Add(time.Hour).Format(time.RFC3339)}); err != nil {
			t.Fatal(err)
		}
	}
	declare("pnk_000001")
	first, err := svc.Timeline(ctx, call, service.Cursor{})
	if err != nil {
		t.Fatal(err)
	}
	if !first.Reset || len(first.Promises) != 1 || first.Promises["pnk_000001"].Standing != service.StandingOwed || first.Promises["pnk_000001"].Horizon != 1 {
		t.Fatalf("from the start: %+v", first)
	}
	declare("pnk_000002")
	next, err := svc.Timeline(ctx, call, first.To)
	if err != nil {
		t.Fatal(err)
	}
	if next.Reset || len(next.Promises) != 1 || next.Promises["pnk_000002"].Text != "ship pnk_000002" || next.To.Seq <= first.To.Seq {
		t.Fatalf("after the cursor: %+v", next)
	}
	foreign := first.To
	foreign.Hash[0] ^= 1
	again, err := svc.Timeline(ctx, call, foreign)
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reset || len(again.Promises) != 2 || again.To != next.To {
		t.Fatalf("from a cursor that does not continue the log: %+v", again)
	}
	due, err := svc.Due(ctx, service.Call{Tenant: "acme", Session: "main", Now: t0.Add(2 * time.Hour)})
	if err != nil || due.Expectations || due.Claims || !due.At.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("due: %+v %v", due, err)
	}
}
