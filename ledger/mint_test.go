package ledger

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Two ledgers given the same clock and the same minted ids write the same
// records, byte for byte: what a cluster's replicas rely on.
func TestMintIDFixesMintedIDs(t *testing.T) {
	logs := make([]*Ledger, 2)
	for i := range logs {
		cfg := testConfig(t0)
		n := 0
		cfg.MintID = func() string { n++; return fmt.Sprintf("pnk_%06x", n) }
		logs[i] = open(t, t.TempDir(), cfg)
	}
	ctx := context.Background()
	for _, l := range logs {
		d := declare("", "debtor")
		res, err := l.Submit(ctx, d, WriteOptions{Actor: "debtor"})
		if err != nil {
			t.Fatal(err)
		}
		if res.Event.ID != "pnk_000001" {
			t.Fatalf("minted %q, want pnk_000001 from MintID", res.Event.ID)
		}
		// The idempotent path mints under the lock, from the same source.
		idem := &Idempotency{Principal: "debtor", Key: "k1", Render: func(*State, []Result) []byte { return []byte(`{}`) }}
		res2, _, _, err := l.Execute(ctx, Command{Promise: declare("", "debtor")}, WriteOptions{Actor: "debtor", RequestID: "k1"}, idem)
		if err != nil {
			t.Fatal(err)
		}
		if res2[0].Event.ID != "pnk_000002" {
			t.Fatalf("minted %q under the lock, want pnk_000002", res2[0].Event.ID)
		}
	}
	if a, b := logs[0].Position(), logs[1].Position(); a != b {
		t.Fatalf("positions differ: %+v vs %+v", a, b)
	}
}

// With SyncByCaller a write settles without waiting for an fsync; Sync
// makes it durable, and it reads back.
func TestSyncByCallerLeavesTheFsyncToSync(t *testing.T) {
	cfg := testConfig(t0)
	cfg.SyncByCaller = true
	dir := t.TempDir()
	l, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Submit(context.Background(), declare("p1", "debtor"), WriteOptions{Actor: "debtor"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = open(t, dir, testConfig(t0))
	if got := allViews(l, t0); !strings.Contains(got, `"id":"p1"`) {
		t.Fatalf("after Sync and reopen: %s", got)
	}
}
