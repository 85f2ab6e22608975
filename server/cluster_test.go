package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/auth"
	"tally/service"
	"tally/store"
)

// insecureConfig is a server's config over a new ledger directory, under
// --insecure-dev.
func insecureConfig(t *testing.T) Config {
	t.Helper()
	root := t.TempDir()
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Root, cfg.Insecure = root, true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cfg
}

// bounded is a Service bounding the bytes of one write, as a cluster
// node's does; it counts the bytes its publications read.
type bounded struct {
	service.Service
	read *int
}

func (bounded) MaxUploadBytes() int64 { return 16 }

func (b bounded) PublishArtifact(ctx context.Context, c service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
	all, err := io.ReadAll(body)
	*b.read += len(all)
	if err != nil {
		return service.ClaimWritten{}, err
	}
	return b.Service.PublishArtifact(ctx, c, d, bytes.NewReader(all))
}

// A cluster node serves the claims family: each of its routes runs
// through the node's Service (here a local one), a body declared past the
// Service's bound for bytes is refused before it is read, and a route that
// reads the ledger directory itself still answers 501 NotInCluster.
func TestClusterServesTheClaimsFamily(t *testing.T) {
	f := newFixture(t)
	for _, rt := range f.srv.claimRoutes() {
		if !clusterRoutes[rt.name] {
			t.Errorf("a cluster node does not serve %s", rt.name)
		}
	}
	read := 0
	s, err := NewCluster(insecureConfig(t), bounded{f.srv.local, &read}, http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	do := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+"/v1/tenants/acme/sessions/main"+path, strings.NewReader(body))
		req.Header.Set("X-Tally-Actor", "maintainer")
		if body != "" {
			req.Header.Set("Content-Type", map[bool]string{true: "application/octet-stream", false: "application/json"}[method == "PUT"])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	steps := []struct {
		method, path, body string
		want               int
	}{
		{"POST", "/claims", `{"claim":"C1","respondent":"maintainer","work":"w","no_checks":true}`, http.StatusCreated},
		{"POST", "/claims/C1/post", `{}`, http.StatusOK},
		{"POST", "/claims/C1/receipt", `{}`, http.StatusOK},
		{"PUT", "/claims/C1/artifacts/a0?generation=1", "more than 16 bytes", http.StatusRequestEntityTooLarge},
		{"PUT", "/claims/C1/artifacts/a1?generation=1", "bytes", http.StatusCreated},
		{"GET", "/claims/C1/artifacts/a0", "", http.StatusNotFound},
		{"GET", "/claims/C1/artifacts/a1", "", http.StatusOK},
		{"GET", "/claims/C1", "", http.StatusOK},
		{"GET", "/ready?seat=maintainer", "", http.StatusOK}, // a seat's ready list, through the node's Service
	}
	for i, st := range steps {
		if i == 4 && read != 0 {
			t.Fatalf("the Service read %d bytes of a body declared past its bound", read)
		}
		if code, body := do(st.method, st.path, st.body); code != st.want {
			t.Fatalf("%s %s: %d %s", st.method, st.path, code, body)
		} else if code == http.StatusRequestEntityTooLarge && !strings.Contains(body, "at most 16 bytes") {
			t.Fatalf("%s %s: %s", st.method, st.path, body)
		}
	}
}

// A cluster node's status and metrics are its operator's: with tokens,
// an admin of every tenant is served them, another token is refused (403)
// and no token is asked for one (401); health is anyone's. Under
// --insecure-dev every route is open.
func TestClusterStatusAndMetricsAreTheOperators(t *testing.T) {
	cfg := insecureConfig(t)
	cfg.Insecure = false
	now := time.Now()
	keeper := auth.Open(cfg.Root)
	admin, _, err := keeper.Create(auth.AllTenants, "ops", auth.RoleAdmin, now)
	if err != nil {
		t.Fatal(err)
	}
	acmeAdmin, _, err := keeper.Create("acme", "boss", auth.RoleAdmin, now)
	if err != nil {
		t.Fatal(err)
	}
	agent, _, err := keeper.Create("acme", "alice", auth.RoleAgent, now)
	if err != nil {
		t.Fatal(err)
	}
	status := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"members":[]}`)) })
	get := func(srv *Server, path, token string) int {
		req := httptest.NewRequest("GET", path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		srv.mux.ServeHTTP(rec, req)
		return rec.Code
	}
	srv, err := NewCluster(cfg, nil, status)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/cluster/status", "/metrics"} {
		for _, c := range []struct {
			who, token string
			want       int
		}{{"no token", "", 401}, {"an agent", agent, 403}, {"a tenant's admin", acmeAdmin, 403}, {"the operator", admin, 200}} {
			if got := get(srv, path, c.token); got != c.want {
				t.Errorf("GET %s as %s: %d, want %d", path, c.who, got, c.want)
			}
		}
	}
	if got := get(srv, "/healthz", ""); got != 200 {
		t.Errorf("GET /healthz without a token: %d", got)
	}
	cfg.Insecure = true
	open, err := NewCluster(cfg, nil, status)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/cluster/status", "/metrics"} {
		if got := get(open, path, ""); got != 200 {
			t.Errorf("GET %s under --insecure-dev: %d", path, got)
		}
	}
}
