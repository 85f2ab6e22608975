package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/auth"
	"tally/rest"
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
// through the node's Service (here a local one), and a body declared past
// the Service's bound for bytes is refused before it is read.
func TestClusterServesTheClaimsFamily(t *testing.T) {
	f := newFixture(t)
	read := 0
	s, err := NewCluster(insecureConfig(t), bounded{f.srv.local, &read}, fakeNode{})
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
		} else if code == http.StatusRequestEntityTooLarge && !(strings.Contains(body, `"code":"ArtifactTooLarge"`) && strings.Contains(body, "over this server's limit of 16 bytes")) {
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
	status := fakeNode{}
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

// fakeNode is a cluster node's operations: each decodes a document of
// one member, "group", and answers it with its operation's name, counting
// in ran the ones that got past their decoding.
type fakeNode struct{ ran *int }

type fakeDoc struct {
	Group uint64 `json:"group"`
}

func (f fakeNode) run(name string, decode func(any) error) (any, error) {
	var d fakeDoc
	if err := decode(&d); err != nil {
		return nil, err
	}
	if f.ran != nil {
		*f.ran++
	}
	return map[string]any{"op": name, "group": d.Group}, nil
}

// Forward: the fake holds every session.
func (f fakeNode) Forward(string, string) (string, bool) { return "", false }

func (f fakeNode) OpStatus(context.Context, func(any) error) (any, error) {
	return map[string]any{"members": []string{}}, nil
}
func (f fakeNode) OpMembers(context.Context, func(any) error) (any, error) {
	return map[string]any{"members": []string{}}, nil
}
func (f fakeNode) OpHealth(context.Context, func(any) error) (any, error) {
	return nil, rest.NewRetryable("NoQuorum", "no quorum reached from this node in group(s) [2]", api.M("groups", []byte("[2]")))
}
func (f fakeNode) OpIdentity(context.Context, func(any) error) (any, error) {
	return map[string]any{"cluster_id": "c1", "node_id": 1}, nil
}
func (f fakeNode) OpJoin(_ context.Context, d func(any) error) (any, error) { return f.run("join", d) }
func (f fakeNode) OpAddNode(_ context.Context, d func(any) error) (any, error) {
	return f.run("add-node", d)
}
func (f fakeNode) OpRemoveNode(_ context.Context, d func(any) error) (any, error) {
	return f.run("remove-node", d)
}
func (f fakeNode) OpTransferLeader(_ context.Context, d func(any) error) (any, error) {
	return f.run("transfer-leader", d)
}
func (f fakeNode) OpPlace(_ context.Context, d func(any) error) (any, error) {
	return f.run("place", d)
}
func (f fakeNode) OpPlacements(_ context.Context, d func(any) error) (any, error) {
	return f.run("placements", d)
}
func (f fakeNode) OpConfigure(_ context.Context, d func(any) error) (any, error) {
	return f.run("configure", d)
}
func (f fakeNode) OpMarkDead(_ context.Context, d func(any) error) (any, error) {
	return f.run("mark-dead", d)
}
func (f fakeNode) OpDrain(_ context.Context, d func(any) error) (any, error) {
	return f.run("drain", d)
}
func (f fakeNode) OpConstrain(_ context.Context, d func(any) error) (any, error) {
	return f.run("constrain", d)
}
func (f fakeNode) OpBackup(_ context.Context, d func(any) error, w io.Writer) error {
	if _, err := f.run("backup", d); err != nil {
		return err
	}
	_, err := w.Write([]byte("backup\n"))
	return err
}

// The cluster's routes are the route table's, behind the middleware of
// every route: a member the document does not have is refused by name
// (400), a body of another media type (415) or past the named bound (413)
// before a byte of it is used, each with the error document and the
// route's metric; a 503 carries Retry-After. Nothing refused runs.
func TestClusterRoutesRefuseLikeTheOthers(t *testing.T) {
	ran := 0
	s, err := NewCluster(insecureConfig(t), nil, fakeNode{&ran})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	do := func(method, path, media, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if media != "" {
			req.Header.Set("Content-Type", media)
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec
	}
	over := `{"group":` + strings.Repeat(" ", clusterRequestMax) + `1}`
	var signed []string // every route that takes a body: the signed ones, the join and the backup
	for _, r := range s.routes {
		if r.body == clusterRequest {
			signed = append(signed, r.pattern)
		}
	}
	if len(signed) < 10 {
		t.Fatalf("the cluster's routes with a body: %v", signed)
	}
	for _, p := range signed {
		for _, c := range []struct {
			what, media, body string
			status            int
			doc               string
		}{
			{"an unknown member", "application/json", `{"group":1,"grup":2}`, 400,
				`{"schema_version":1,"error":"grup: is not a field of this command (group)","code":"invalid"}` + "\n"},
			{"another media type", "text/plain", `{"group":1}`, 415,
				`{"schema_version":1,"error":"Content-Type: must be application/json (got \"text/plain\")","code":"UnsupportedMediaType"}` + "\n"},
			{"a body past its bound", "application/json", over, 413,
				`{"schema_version":1,"error":"body: at most 65536 bytes","code":"invalid"}` + "\n"},
			{"no body", "application/json", ``, 400,
				`{"schema_version":1,"error":"body: must be one JSON object","code":"invalid"}` + "\n"},
		} {
			rec := do("POST", p, c.media, c.body)
			if rec.Code != c.status || rec.Body.String() != c.doc {
				t.Errorf("POST %s with %s: %d %s, want %d %s", p, c.what, rec.Code, rec.Body, c.status, c.doc)
			}
		}
	}
	if ran != 0 {
		t.Fatalf("%d refused requests ran", ran)
	}
	if rec := do("POST", "/v1/cluster/transfer-leader", "application/json", `{"group":2}`); rec.Code != 200 || rec.Body.String() != `{"group":2,"op":"transfer-leader"}`+"\n" {
		t.Fatalf("transfer-leader: %d %s", rec.Code, rec.Body)
	}
	if rec := do("POST", "/v1/cluster/backup", "application/json", `{"group":2}`); rec.Code != 200 || rec.Body.String() != "backup\n" || rec.Header().Get("Content-Type") != "application/vnd.tally.backup" {
		t.Fatalf("backup: %d %s %v", rec.Code, rec.Body, rec.Header())
	}
	rec := do("GET", "/v1/cluster/health", "", "")
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "1" || rec.Body.String() != `{"schema_version":1,"error":"no quorum reached from this node in group(s) [2]","code":"NoQuorum","groups":[2]}`+"\n" {
		t.Fatalf("health: %d %q %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if ran != 2 {
		t.Fatalf("ran %d operations, want 2", ran)
	}
	// Each was counted under its route's name.
	mrec := do("GET", "/metrics", "", "")
	for _, want := range []string{`route="cluster.transfer_leader"`, `route="cluster.join"`, `route="cluster.health"`} {
		if !strings.Contains(mrec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// A cluster node serves every route of the route table: none answers 501
// NotInCluster unless its route says notInCluster (none does). expect.task
// (an origin task's outcome) answers from the node's Service.
func TestClusterNodeServesEveryRoute(t *testing.T) {
	f := newFixture(t)
	s, err := NewCluster(insecureConfig(t), f.srv.local, fakeNode{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	param := regexp.MustCompile(`\{([a-z]+)(\.\.\.)?\}`)
	for _, rt := range s.routes {
		path := strings.TrimSuffix(rt.pattern, "{$}")
		path = param.ReplaceAllStringFunc(path, func(m string) string {
			switch m {
			case "{tenant}":
				return "acme"
			case "{session}":
				return "main"
			}
			return "x1"
		})
		// A stream answers until its request ends.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		req := httptest.NewRequestWithContext(ctx, rt.method, path, strings.NewReader("{}"))
		req.Header.Set("Content-Type", rt.mediaType())
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		cancel()
		if (rec.Code == http.StatusNotImplemented) != rt.notInCluster {
			t.Errorf("%s %s (%s): %d %s", rt.method, path, rt.name, rec.Code, rec.Body)
		}
	}
	// The OpenAPI document of a node describes its cluster routes.
	doc, err := s.OpenAPI()
	if err != nil {
		t.Fatal(err)
	}
	join, _ := doc["paths"].(map[string]any)["/v1/cluster/join"].(map[string]any)["post"].(map[string]any)
	if join["operationId"] != "cluster.join" || join["parameters"] != nil || doc["components"].(map[string]any)["schemas"].(map[string]any)[clusterRequest] == nil {
		t.Fatalf("openapi: POST /v1/cluster/join: %v", join)
	}
	req := httptest.NewRequest("GET", "/v1/tenants/acme/sessions/main/tasks/t1", nil)
	req.Header.Set("X-Tally-Actor", "alice")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	if rec.Code == http.StatusNotImplemented || strings.Contains(rec.Body.String(), CodeNotInCluster) {
		t.Fatalf("expect.task on a cluster node: %d %s", rec.Code, rec.Body)
	}
}
