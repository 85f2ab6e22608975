package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The cluster's tokens live in its meta group: the bootstrap node prints a
// first admin token once; `tally token` through any node with it mints a
// tenant's tokens, which every node accepts; a revocation through one node
// reaches every node; the first token reads no session itself.
func TestClusterTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startClusterWith(t, t.TempDir(), func(n *cnode) { n.secure = true })
	n1 := nodes[0]
	var admin string
	waitUntil(t, "the first admin token on node 1's stdout", 30*time.Second, func() bool {
		admin = firstToken(n1.printed())
		return admin != ""
	})
	for _, n := range nodes[1:] {
		if tok := firstToken(n.printed()); tok != "" {
			t.Fatalf("node %d, which joined, printed a first token", n.id)
		}
	}
	tokenCLI := func(n *cnode, token string, args ...string) result {
		return run(t, runOpts{env: []string{"TALLY_URL=" + n.url(), "TALLY_TOKEN=" + token}}, append([]string{"token"}, args...)...)
	}

	// The admin mints an agent of tenant acme through node 2, and an
	// admin of acme through node 3.
	var agent string
	waitUntil(t, "a token minted through node 2", 20*time.Second, func() bool {
		r := tokenCLI(nodes[1], admin, "create", "--tenant", "acme", "--participant", "alice", "--role", "agent")
		agent = strings.TrimSpace(r.out)
		return r.code == 0 && strings.HasPrefix(agent, "tally_")
	})
	r := tokenCLI(nodes[2], admin, "create", "--tenant", "acme", "--participant", "boss", "--role", "admin", "--json")
	if r.code != 0 {
		t.Fatalf("admin token: %v", r)
	}
	var acmeAdmin struct{ ID, Token, Tenant, Role string }
	if err := json.Unmarshal([]byte(r.out), &acmeAdmin); err != nil || acmeAdmin.Tenant != "acme" || acmeAdmin.Role != "admin" {
		t.Fatalf("create --json: %v %v", r, err)
	}

	// The agent's token works on every node once the meta group applied it.
	var agentID string
	for i, n := range nodes {
		waitUntil(t, "the agent's token accepted by node "+n.url(), 20*time.Second, func() bool {
			code, _ := tokenDeclare(n, agent, "acme", "tokens", "from node "+n.url())
			return code == http.StatusCreated
		})
		_ = i
	}
	// An agent manages no tokens; the acme admin manages acme's only; the
	// first token reads no session.
	if r := tokenCLI(nodes[0], agent, "create", "--tenant", "acme", "--participant", "mallory"); r.code != 1 || !strings.Contains(r.err, "does not administer") {
		t.Fatalf("an agent minted a token: %v", r)
	}
	if r := tokenCLI(nodes[0], acmeAdmin.Token, "create", "--tenant", "other", "--participant", "mallory"); r.code != 1 || !strings.Contains(r.err, "tenant") {
		t.Fatalf("acme's admin minted a token of another tenant: %v", r)
	}
	if code, _ := tokenDeclare(nodes[0], admin, "acme", "tokens", "by the first token"); code != http.StatusNotFound {
		t.Fatalf("the first admin token wrote a session: %d", code)
	}
	r = tokenCLI(nodes[2], acmeAdmin.Token, "ls", "--json")
	var ls struct {
		Tokens []struct{ ID, Tenant, Participant string }
	}
	if err := json.Unmarshal([]byte(r.out), &ls); r.code != 0 || err != nil {
		t.Fatalf("ls: %v %v", r, err)
	}
	for _, tk := range ls.Tokens {
		if tk.Tenant != "acme" {
			t.Fatalf("acme's admin lists a token of tenant %q", tk.Tenant)
		}
		if tk.Participant == "alice" {
			agentID = tk.ID
		}
	}
	if len(ls.Tokens) != 2 || agentID == "" {
		t.Fatalf("acme's admin lists %+v", ls.Tokens)
	}

	// A revocation through node 1 reaches nodes 2 and 3.
	if r := tokenCLI(nodes[0], acmeAdmin.Token, "revoke", agentID); r.code != 0 {
		t.Fatalf("revoke: %v", r)
	}
	for _, n := range nodes {
		waitUntil(t, "the revoked token refused by node "+n.url(), 10*time.Second, func() bool {
			code, _ := tokenDeclare(n, agent, "acme", "tokens", "after revocation")
			return code == http.StatusUnauthorized
		})
	}

	// Restarted, the bootstrap node prints no second first token.
	n1.stop()
	before, beforeLog := len(n1.printed()), len(n1.log())
	n1.joinArgs = nil
	n1.start(t)
	// The node decides on a first token after a read of the meta group, in
	// the background: wait for it to say it minted none, then look.
	waitUntil(t, "the restarted bootstrap node to decide on a first token", 30*time.Second, func() bool {
		return strings.Contains(n1.log()[beforeLog:], "first admin token: the cluster has tokens already") || firstToken(n1.printed()[before:]) != ""
	})
	if tok := firstToken(n1.printed()[before:]); tok != "" {
		t.Fatal("the restarted bootstrap node printed another first token")
	}
	if r := tokenCLI(n1, admin, "ls"); r.code != 0 || !strings.Contains(r.out, "cluster-admin") {
		t.Fatalf("the first token after a restart: %v", r)
	}
}

// firstToken is the secret a bootstrap node printed after its first admin
// token's line, or "".
func firstToken(lines []string) string {
	for i, l := range lines {
		if strings.HasPrefix(l, "first admin token") && i+1 < len(lines) {
			return strings.TrimSpace(lines[i+1])
		}
	}
	return ""
}

// tokenDeclare declares a promise through n with a bearer token.
func tokenDeclare(n *cnode, token, tenant, session, text string) (int, string) {
	req, _ := http.NewRequest("POST", n.url()+"/v1/tenants/"+tenant+"/sessions/"+session+"/promises",
		strings.NewReader(`{"promise":"`+text+`","to":"bob","until":"2h"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := httpc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	nr, _ := res.Body.Read(buf)
	b.Write(buf[:nr])
	return res.StatusCode, b.String()
}
