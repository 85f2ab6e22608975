package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The token routes: an admin of acme mints, lists and revokes acme's
// tokens and no other tenant's; an agent manages none; a minted token
// authenticates at once and a revoked one no longer; a bad grant names its
// field; the secret is in the create answer only.
func TestTokenRoutes(t *testing.T) {
	f := adminFixture(t)
	body := f.want(201, "POST", "/v1/tokens", "boss", `{"tenant":"acme","participant":"carol","role":"person"}`)
	var made struct {
		SchemaVersion int `json:"schema_version"`
		ID, Token     string
		Tenant, Role  string
	}
	if err := json.Unmarshal([]byte(body), &made); err != nil || made.Role != "person" || !strings.HasPrefix(made.Token, "tally_") {
		t.Fatalf("create: %s %v", body, err)
	}
	if !strings.HasPrefix(body, `{"schema_version":1,"id":"tok_`) || !strings.Contains(body, `,"token":"tally_`) {
		t.Fatalf("create document: %s", body)
	}
	f.tokens["carol"] = made.Token
	f.want(200, "GET", "/v1/tenants/acme/whoami", "carol", "")

	for _, c := range []struct {
		who, body string
		status    int
		want      string
	}{
		{"reviewer", `{"tenant":"acme","participant":"x"}`, 403, `"code":"forbidden"`},
		{"boss", `{"tenant":"other","participant":"x"}`, 403, "tenant: this token does not administer the tokens of tenant other"},
		{"boss", `{"tenant":"*","participant":"x","role":"admin"}`, 403, "tenant"},
		{"boss", `{"tenant":"acme","participant":"x","role":"root"}`, 400, `role: must be agent, person, timekeeper or admin, not \"root\"`},
		{"boss", `{"tenant":"acme","participant":""}`, 400, "participant: an identity of 1-1024 bytes is required"},
		{"boss", `{"tenant":"acme","participant":"x","extra":1}`, 400, "extra"},
		{"", `{"tenant":"acme","participant":"x"}`, 401, "unauthenticated"},
	} {
		before := tokensFile(t, f)
		code, got, _ := f.do("POST", "/v1/tokens", c.who, c.body)
		if code != c.status || !strings.Contains(got, c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.who, c.body, code, got, c.status, c.want)
		}
		if after := tokensFile(t, f); after != before {
			t.Errorf("%s %s: a refused create changed the tokens file", c.who, c.body)
		}
	}

	list := f.want(200, "GET", "/v1/tokens", "boss", "")
	if strings.Contains(list, "tally_") || strings.Contains(list, `"tenant":"other"`) || !strings.Contains(list, made.ID) {
		t.Fatalf("list: %s", list)
	}
	f.want(403, "GET", "/v1/tokens", "reviewer", "")
	f.want(400, "GET", "/v1/tokens?tenant=acme", "boss", "")

	// The foreign tenant's token is not acme's admin's to revoke: unknown.
	var foreign string
	for _, tk := range mustTokens(t, f) {
		if tk.Tenant == "other" {
			foreign = tk.ID
		}
	}
	before := tokensFile(t, f)
	f.want(404, "POST", "/v1/tokens/"+foreign+"/revoke", "boss", "")
	f.want(404, "POST", "/v1/tokens/tok_none/revoke", "boss", "")
	f.want(404, "POST", "/v1/tokens/"+made.ID+"/revoke", "reviewer", "") // an agent administers none
	if tokensFile(t, f) != before {
		t.Fatal("a refused revocation changed the tokens file")
	}
	revoked := f.want(200, "POST", "/v1/tokens/"+made.ID+"/revoke", "boss", "")
	if !strings.Contains(revoked, `"revoked":true`) {
		t.Fatalf("revoke: %s", revoked)
	}
	f.want(401, "GET", "/v1/tenants/acme/whoami", "carol", "")
}

// tokensFile is the server's tokens file as it stands.
func tokensFile(t *testing.T, f *fixture) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.root, "tokens.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustTokens(t *testing.T, f *fixture) []struct{ ID, Tenant string } {
	toks, err := fileTokens(f.srv).List()
	if err != nil {
		t.Fatal(err)
	}
	var out []struct{ ID, Tenant string }
	for _, tk := range toks {
		out = append(out, struct{ ID, Tenant string }{tk.ID, tk.Tenant})
	}
	return out
}

// Every REST read takes consistency (linearizable, the default, or stale),
// leaves it out of the route's own parameters, and marks its answer with
// the consistency it was served at.
func TestReadConsistency(t *testing.T) {
	f := newFixture(t)
	f.want(201, "POST", base+"/promises", "reviewer", `{"promise":"p","to":"author","until":"2h"}`)
	for _, c := range []struct {
		query  string
		status int
		header string
	}{
		{"", 200, "linearizable"},
		{"?consistency=linearizable", 200, "linearizable"},
		{"?consistency=stale&state=all", 200, "stale"},
		{"?consistency=eventual", 400, ""},
		{"?consistency=stale&consistency=stale", 400, ""},
	} {
		code, body, h := f.do("GET", base+"/promises"+c.query, "reviewer", "")
		if code != c.status || h.Get("Tally-Consistency") != c.header {
			t.Errorf("%q: %d %q %s", c.query, code, h.Get("Tally-Consistency"), body)
		}
		if code == 400 && !strings.Contains(body, "consistency: must be linearizable (the default) or stale") {
			t.Errorf("%q: %s", c.query, body)
		}
	}
}
