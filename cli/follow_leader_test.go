package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Over TALLY_URL the CLI follows a cluster node's not-leader answer to the
// leader it names, under the same request id: the write lands once and
// prints what it prints at the leader; a node naming no leader is the
// refusal, exit 1.
func TestRemoteFollowsLeader(t *testing.T) {
	p := remoteSide(t, parityScenario{tokens: map[string]string{"reviewer": "agent", "observer": "agent"}}, t.TempDir())
	leaderAddr := strings.TrimPrefix(p.env["TALLY_URL"], "http://")
	var mu sync.Mutex
	var keys []string // of the writes
	names := leaderAddr
	follower := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Method == http.MethodPost { // not the identity the CLI asks for first
			keys = append(keys, r.Header.Get("Idempotency-Key"))
		}
		leader := names
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		doc := `{"error":"group 1 unavailable at this node: not the leader","code":"Unavailable","group":1`
		if leader != "" {
			doc += `,"leader":1,"leader_addr":"` + leader + `"`
		}
		fmt.Fprintln(w, doc+"}")
	}))
	defer follower.Close()
	p.env["TALLY_URL"] = follower.URL

	declare := step("reviewer", ExitOK, "promise", "x", "--id", "r1", "--to", "author", "--until", "2h", "--request-id", "k1", "--json")
	code, out, errs := p.run(declare)
	if code != ExitOK || !strings.Contains(out, `"id":"r1"`) {
		t.Fatalf("declare through a follower: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, again, _ := p.run(declare); code != ExitOK || again != out {
		t.Fatalf("its retry: exit %d, %q, want %q", code, again, out)
	}
	mu.Lock()
	got := append([]string(nil), keys...)
	mu.Unlock()
	if len(got) != 2 || got[0] != "k1" || got[1] != "k1" {
		t.Fatalf("the follower got keys %q", got)
	}
	if code, out, errs := p.run(step("observer", ExitOK, "ls", "--all", "--json")); code != ExitOK || strings.Count(out, `"id":"r1"`) != 1 {
		t.Fatalf("the write landed other than once: exit %d, %q %q", code, out, errs)
	}
	mu.Lock()
	names = ""
	mu.Unlock()
	code, out, errs = p.run(step("reviewer", ExitError, "promise", "y", "--id", "r2", "--to", "author", "--until", "2h"))
	if code != ExitError || out != "" || !strings.Contains(errs, "group 1 unavailable at this node") {
		t.Fatalf("no leader named: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
