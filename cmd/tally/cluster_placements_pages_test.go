package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"tally/cluster"
	"tally/cluster/replica"
)

// tally cluster placements reads a directory larger than one answer page
// by page, each request signed and naming the session its page follows,
// and prints one list (and with --json one document), as it did when a
// node answered the whole directory at once. The node here is a stand-in
// on 127.0.0.1 answering as a node does, 1,000 placements a page.
func TestClusterPlacementsReadInPages(t *testing.T) {
	const n = 2*cluster.PlacementsPageMax + 500
	var all []replica.Placement
	for i := range n {
		all = append(all, replica.Placement{Tenant: "acme", Session: fmt.Sprintf("s%05d", i), Group: uint64(2 + i%4)})
	}
	var mu sync.Mutex
	var afters []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case cluster.IdentityPath:
			json.NewEncoder(w).Encode(cluster.Identity{SchemaVersion: 1, Target: cluster.Target{ClusterID: "c1", NodeID: 1}})
		case cluster.PlacementsPath:
			var req cluster.PlacementsRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.MAC == "" || req.NodeID != 1 {
				http.Error(w, "unsigned", http.StatusForbidden)
				return
			}
			mu.Lock()
			afters = append(afters, req.After)
			mu.Unlock()
			page := cluster.Placements{SchemaVersion: 1, Placements: []replica.Placement{}}
			for _, p := range all {
				if p.Name() > req.After && len(page.Placements) < cluster.PlacementsPageMax {
					page.Placements = append(page.Placements, p)
				}
			}
			if len(page.Placements) == cluster.PlacementsPageMax {
				page.Next = page.Placements[len(page.Placements)-1].Name()
			}
			json.NewEncoder(w).Encode(page)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	secret := runOpts{env: []string{"TALLY_JOIN_SECRET=" + clusterSecret}}
	r := run(t, secret, "cluster", "placements", "--node", srv.URL)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if r.code != 0 || len(lines) != n+1 || !strings.HasPrefix(lines[1], "acme/s00000  2") || !strings.HasPrefix(lines[n], fmt.Sprintf("acme/s%05d  %d", n-1, 2+(n-1)%4)) {
		t.Fatalf("exit %d, %d lines, stderr %q", r.code, len(lines), r.err)
	}
	want := []string{"", "acme/s00999", "acme/s01999"}
	if fmt.Sprint(afters) != fmt.Sprint(want) {
		t.Fatalf("pages asked after %q, want %q", afters, want)
	}
	r = run(t, secret, "cluster", "placements", "--node", srv.URL, "--json")
	var doc cluster.Placements
	if err := json.Unmarshal([]byte(r.out), &doc); r.code != 0 || err != nil || len(doc.Placements) != n || doc.Next != "" || doc.Placements[n-1] != all[n-1] {
		t.Fatalf("--json: exit %d, %d placements, next %q: %v", r.code, len(doc.Placements), doc.Next, err)
	}
}
