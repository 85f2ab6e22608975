package server

import (
	"bytes"
	"context"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

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

// A declaration is answered from its own record (renderDeclared) instead of
// the state read again under the session lock: the two answers are the
// same document, with or without minted id, task, meta and warnings.
func TestDeclarationAnsweredFromItsRecord(t *testing.T) {
	f := newFixture(t)
	l, err := f.srv.session("acme", "main")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []promise.Declare{
		{ID: "r1", Text: "x", By: "reviewer", To: "author", Until: t0.Add(time.Hour)},
		{Text: "minted", By: "reviewer", To: "author", Task: "task-9", Until: t0.Add(-time.Hour), Meta: `{"rung":0}`},
		{ID: "r3", Text: "to self", By: "reviewer", To: "reviewer", Until: t0.Add(time.Hour)},
	} {
		res, _, _, err := l.Execute(context.Background(), ledger.Command{Promise: d}, ledger.WriteOptions{Actor: "reviewer"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := f.srv.renderDeclared(res)
		var want []byte
		l.Read(func(st *ledger.State) { want = f.srv.renderPromise(d.ID)(st, res) })
		if got == nil || !bytes.Equal(got, want) {
			t.Fatalf("from the record:\n%s\nfrom the state:\n%s", got, want)
		}
	}
	// A declaration on an antecedent, and every other write, reads the state.
	on := promise.Declare{ID: "r4", Text: "after", By: "reviewer", To: "author", On: "r1", Until: t0.Add(time.Hour)}
	res, _, _, err := l.Execute(context.Background(), ledger.Command{Promise: on}, ledger.WriteOptions{Actor: "reviewer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.srv.renderDeclared(res); got != nil {
		t.Fatalf("a conditional declaration answered from its record: %s", got)
	}
	code, body, _ := f.do("POST", base+"/promises/r4/amend", "reviewer", `{"until":"3h"}`)
	if code != 200 || !strings.Contains(body, `"state":"conditional"`) {
		t.Fatalf("amend: %d %s", code, body)
	}
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
