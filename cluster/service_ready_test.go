package cluster

import (
	"bytes"
	"context"
	"testing"
	"time"

	"tally/api"
	"tally/service"
)

// A node answers a seat's ready list from its replica, the document a
// local ledger answers; a pool claim's second acquirer is refused there
// as it is locally, naming the holder.
func TestReadyThroughANode(t *testing.T) {
	n := startAlone(t, t.TempDir())
	local, _ := newDirLocal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(actor string) service.Call { return service.Call{Tenant: "acme", Session: "main", Actor: actor} }
	one := 1
	for _, svc := range []service.Service{local, n.Node} {
		if _, err := svc.CreateClaim(ctx, as("maintainer"), api.ClaimCreate{Claim: "P1", Work: "triage", NoChecks: true, Pool: []string{"worker-1", "worker-2"}, Priority: &one}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.PostClaim(ctx, as("maintainer"), api.ClaimPost{Claim: "P1"}); err != nil {
			t.Fatal(err)
		}
	}
	at := time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)
	read := as("worker-1")
	read.Now = at
	want, err := local.Ready(ctx, read, "")
	if err != nil || len(want.Items) != 1 {
		t.Fatalf("locally: %v %+v", err, want)
	}
	got, err := n.Ready(ctx, read, "")
	if err != nil || !bytes.Equal(got.JSON, want.JSON) {
		t.Fatalf("through the node: %v\n%s\nlocally:\n%s", err, got.JSON, want.JSON)
	}
	for _, svc := range []service.Service{local, n.Node} {
		if _, err := svc.AcquireReceipt(ctx, as("worker-2"), api.ClaimReceipt{Claim: "P1"}); err != nil {
			t.Fatal(err)
		}
		_, err := svc.AcquireReceipt(ctx, as("worker-1"), api.ClaimReceipt{Claim: "P1"})
		if err == nil || err.Error() != "claim: receipt already acquired by worker-2 (generation 1)" {
			t.Fatalf("the second acquirer: %v", err)
		}
	}
	if got, err := n.Ready(ctx, read, "worker-1"); err != nil || len(got.Items) != 0 {
		t.Fatalf("after worker-2 took it: %v %s", err, got.JSON)
	}
}
