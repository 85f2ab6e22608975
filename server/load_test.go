package server

import (
	"path/filepath"
	"testing"

	"tally/ledger"
	"tally/promise"
)

// TestLoad256Clients is the bounded load generator: 256 concurrent clients
// declare a fixed count of promises over HTTP, each write acknowledged only
// once durable; then every acknowledged write is present exactly once, in
// the served state and in the log on disk, read back by a fresh ledger once
// the server has shut down.
func TestLoad256Clients(t *testing.T) {
	const clients = 256
	writes := 2048
	if testing.Short() {
		writes = 512
	}
	ls := newLoadServer(t, clients, false)
	r := ls.declareLoad(clients, writes, "load")
	if r.failures > 0 {
		t.Fatalf("%d of %d writes not acknowledged, e.g. %s", r.failures, writes, r.failure)
	}
	ls.checkPresentOnce(t, r.acked)
	t.Logf("%d writes from %d clients: %.0f writes/s, p50 %.1f ms, p99 %.1f ms", writes, clients, r.rate(), r.percentile(0.5), r.percentile(0.99))
	ls.close()

	cfg := ledger.DefaultConfig()
	l, err := ledger.Open(filepath.Join(ls.root, "sessions", "acme", "main"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if rep := l.Verify(); !rep.Whole() || rep.Lines != uint64(writes) {
		t.Fatalf("verify: %+v, want %d lines", rep, writes)
	}
	var ids []string
	l.Read(func(st *ledger.State) {
		st.Promises.Each(func(p *promise.Promise) bool {
			ids = append(ids, p.ID)
			return true
		})
	})
	checkOnce(t, "on disk", ids, r.acked)
}
