package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/auth"
	"tally/expect"
	"tally/promise"
	"tally/rest"
	"tally/server"
	"tally/service"
	"tally/store"
)

var t0 = time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)

// serve starts a server on 127.0.0.1 with a token per identity, and
// returns a client for each.
func serve(t *testing.T, roles map[string]string) (map[string]*Client, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for who, role := range roles {
		tok, _, err := auth.Open(root).Create("acme", who, role, t0)
		if err != nil {
			t.Fatal(err)
		}
		secrets[who] = tok
	}
	cfg := server.DefaultConfig()
	cfg.Root, cfg.WatchEvery = root, 0
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Ledger.Logger = cfg.Logger
	cfg.Ledger.Now = func() time.Time { return t0 }
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	clients := map[string]*Client{}
	for who, tok := range secrets {
		c, err := New(Config{URL: ts.URL + "/", Token: tok, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[who] = c
	}
	return clients, ts.URL
}

// The client is the Service over REST: writes and reads come back as the
// server's documents with their typed results, a request id replays, and a
// refusal is the server's error document as it was sent.
func TestClientPromises(t *testing.T) {
	cs, url := serve(t, map[string]string{"reviewer": "agent", "author": "agent"})
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main"}
	id, err := cs["reviewer"].Whoami(ctx, call)
	if err != nil || id.Actor != "reviewer" || id.Role != "agent" {
		t.Fatalf("whoami: %+v %v", id, err)
	}
	keyed := call
	keyed.RequestID = "k1"
	d := api.PromiseDeclare{ID: "r1", Promise: "x", To: "author", Until: "2h"}
	w, err := cs["reviewer"].DeclarePromise(ctx, keyed, d)
	if err != nil || w.Replayed || w.Seq != 1 || w.Promise.By != "reviewer" || w.Promise.Until != t0.Add(2*time.Hour) {
		t.Fatalf("declare: %+v %v", w, err)
	}
	again, err := cs["reviewer"].DeclarePromise(ctx, keyed, d)
	if err != nil || !again.Replayed || !bytes.Equal(again.JSON, w.JSON) {
		t.Fatalf("retry: replayed=%v %v\n%s\nwant\n%s", again.Replayed, err, again.JSON, w.JSON)
	}
	_, err = cs["author"].AmendPromise(ctx, call, api.PromiseAmend{ID: "r1", Until: "3h"})
	var ref *rest.Refusal
	if !errors.As(err, &ref) || ref.Status != http.StatusForbidden || ref.Code != "forbidden" || !bytes.HasPrefix(ref.Document, []byte(`{"schema_version":1,"error":`)) {
		t.Fatalf("a stranger amends: %v", err)
	}
	resp, err := http.Post(url+"/v1/tenants/acme/sessions/main/promises/r1/amend", "application/json", strings.NewReader(`{"until":"3h"}`))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if _, err := cs["reviewer"].Promise(ctx, service.Call{Tenant: "acme", Session: "nope"}, "r1"); !errors.As(err, &ref) || ref.Code != "NoSuchSession" {
		t.Fatalf("a session that is not there: %v", err)
	}
	if noToken, _ := New(Config{URL: url}); noToken != nil {
		_, err := noToken.Promise(ctx, call, "r1")
		if !errors.As(err, &ref) || ref.Status != 401 || !bytes.Equal(ref.Document, raw) {
			t.Fatalf("without a token: %v, document %s, want %s", err, ref.Document, raw)
		}
	}
	if _, err := cs["reviewer"].AmendPromise(ctx, call, api.PromiseAmend{ID: "r1", Until: "3h"}); err != nil {
		t.Fatal(err)
	}
	shown, err := cs["author"].Promise(ctx, service.Call{Tenant: "acme", Session: "main", Now: t0.Add(4 * time.Hour)}, "r1")
	if err != nil || len(shown.Promise.Horizons) != 2 || !shown.Promise.Overdue || !shown.Now.Equal(t0.Add(4*time.Hour)) {
		t.Fatalf("show: %+v %v", shown, err)
	}
	list, err := cs["author"].ListPromises(ctx, call, promise.Filter{State: "all", By: "author"})
	if err != nil || len(list.Promises) != 0 || !bytes.Contains(list.JSON, []byte(`"promises":[]`)) {
		t.Fatalf("ls --by author: %+v %v", list, err)
	}
	if _, err := cs["reviewer"].DeclarePromise(ctx, call, api.PromiseDeclare{ID: "r2", Promise: "y", To: "author", Until: "2h", Task: "task-9"}); err != nil {
		t.Fatal(err)
	}
	byTask, err := cs["author"].ListPromises(ctx, call, promise.Filter{State: "all", Task: "task-9"})
	if err != nil || len(byTask.Promises) != 1 || byTask.Promises[0].ID != "r2" {
		t.Fatalf("the promises of task-9: %+v %v", byTask.Promises, err)
	}
	if _, err := New(Config{URL: "not a url"}); err == nil {
		t.Fatal("a URL that is not one")
	}
}

// An origin task over REST: its expectations, then its outcome, as the
// server's document; a task that is no origin is the server's not found.
func TestClientTaskOrigin(t *testing.T) {
	cs, _ := serve(t, map[string]string{"agent": "agent"})
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main"}
	d := api.ExpectRaise{ExpectationID: "e1", Kind: "k", Subject: &expect.Subject{Type: "s", ID: "1"},
		SatisfiedBy: &api.FactKeyRef{FactKey: "f:1"}, DueAt: "2030-01-01T00:00:00Z", Basis: "observed",
		Origin: &expect.Origin{TaskID: "task-7"}}
	if _, err := cs["agent"].RaiseExpectation(ctx, call, d); err != nil {
		t.Fatal(err)
	}
	o, err := cs["agent"].TaskOrigin(ctx, call, "task-7")
	if err != nil || o.Task.TaskID != "task-7" || o.Task.Outcome != "" || len(o.Task.Expectations) != 1 || o.Task.Expectations[0].ExpectationID != "e1" {
		t.Fatalf("open origin: %+v %v", o, err)
	}
	if _, err := cs["agent"].RecordTaskOutcome(ctx, call, "task-7", api.ExpectTaskOutcome{Outcome: "cancelled"}); err != nil {
		t.Fatal(err)
	}
	o, err = cs["agent"].TaskOrigin(ctx, call, "task-7")
	if err != nil || o.Task.Outcome != "cancelled" || o.Task.Expectations[0].State != "withdrawn" || !bytes.Contains(o.JSON, []byte(`"outcome":"cancelled"`)) {
		t.Fatalf("cancelled origin: %+v %v", o, err)
	}
	var ref *rest.Refusal
	if _, err := cs["agent"].TaskOrigin(ctx, call, "task-none"); !errors.As(err, &ref) || ref.Status != http.StatusNotFound || !strings.Contains(ref.Message, "taskId") {
		t.Fatalf("no origin: %v", err)
	}
}

// The log verbs: an admin imports all or none, an export streams the log,
// verify reports it whole and names it under the server's directory.
func TestClientLogs(t *testing.T) {
	cs, _ := serve(t, map[string]string{"boss": "admin", "reviewer": "agent"})
	ctx := context.Background()
	call := service.Call{Tenant: "acme", Session: "main"}
	lines := `{"ts":"2026-09-01T10:00:00Z","type":"promise","id":"p1","promise":"old","by":"reviewer","to":"author","until":"2026-09-02T10:00:00Z"}` + "\n" +
		`{"ts":"2026-09-01T10:05:00Z","type":"nudge","promise":"p1"}` + "\n"
	var ref *rest.Refusal
	if _, err := cs["reviewer"].Import(ctx, call, []byte(lines)); !errors.As(err, &ref) || ref.Status != http.StatusForbidden {
		t.Fatalf("an agent imports: %v", err)
	}
	if _, err := cs["boss"].Import(ctx, call, []byte(lines+"{not json\n")); !errors.As(err, &ref) || !ref.Usage() || !strings.Contains(ref.Message, "line 3") {
		t.Fatalf("a bad line: %v", err)
	}
	imp, err := cs["boss"].Import(ctx, call, []byte(lines))
	if err != nil || imp.Report.Appended != 2 || imp.Report.Unknown != 1 || imp.Report.LastSeq != 2 || len(imp.Report.Warnings) != 1 {
		t.Fatalf("import: %+v %v", imp, err)
	}
	var out bytes.Buffer
	var warned string
	if _, err := cs["reviewer"].Export(ctx, call, "pinki", &out, func(w string) { warned = w }); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != strings.SplitAfter(lines, "\n")[0] || !strings.Contains(warned, `"nudge" ×1`) {
		t.Fatalf("export: %q, warned %q", got, warned)
	}
	v, err := cs["reviewer"].Verify(ctx, call)
	if err != nil || !v.Whole || v.Log != "sessions/acme/main/log.jsonl" {
		t.Fatalf("verify: %+v %v", v, err)
	}
	all, err := cs["reviewer"].VerifyAll(ctx, call)
	if err != nil || !all.Whole || !bytes.Contains(all.JSON, []byte(`"session":"acme/main"`)) {
		t.Fatalf("verify every session: %s %v", all.JSON, err)
	}
	if _, err := cs["reviewer"].Export(ctx, call, "xml", &out, nil); !errors.As(err, &ref) || !ref.Usage() {
		t.Fatalf("export as xml: %v", err)
	}
}
