package server

import (
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/zeebo/blake3"

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

// The request digest is the same from a reused hasher as from a fresh one.
func TestCommandDigestReusesHashers(t *testing.T) {
	fresh := func(method, path string, body []byte) [32]byte {
		h := blake3.NewDeriveKey("tally 2026-11 request digest v1")
		h.WriteString(method + " " + path + "\n" + strconv.Itoa(len(body)) + "\n")
		h.Write(body)
		var sum [32]byte
		h.Sum(sum[:0])
		return sum
	}
	s := &Server{}
	for i, body := range []string{`{"promise":"a"}`, `{"promise":"b","to":"c"}`, ``, `{"promise":"a"}`} {
		r := httptest.NewRequest("POST", base+"/promises", nil)
		if got, want := s.commandDigest(r, []byte(body)), fresh("POST", base+"/promises", []byte(body)); got != want {
			t.Fatalf("request %d: digest %x, want %x", i, got, want)
		}
	}
}
