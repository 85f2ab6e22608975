package main

// A cluster backed up after `cluster groups add`, restored: the restored
// node adds the groups again and moves the sessions the backup found in
// another group than their name's hash (one moved, one placed) back to
// them, each whole.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"tally/cluster/replica"
)

func TestClusterRestoreRecreatesAddedGroups(t *testing.T) {
	dir := t.TempDir()
	nodes := startClusterWith(t, dir, func(n *cnode) {
		handMoved(n)
		if n.id == 1 {
			n.joinArgs = append(n.joinArgs, "--groups", "2")
		}
	})
	secret := secretEnv()
	var hashed []string // in their hash's group, one in each
	for g := uint64(2); g <= 3; g++ {
		for i := 0; ; i++ {
			if s := fmt.Sprintf("rg-%d", i); replica.GroupOf(2, "acme", s) == g && !slices.Contains(hashed, s) {
				hashed = append(hashed, s)
				break
			}
		}
	}
	for _, s := range hashed {
		for i := range 5 {
			if code, resp := declareAgain(nodes, i, s, fmt.Sprintf("%s-%d", s, i), fmt.Sprintf("%s %d", s, i)); code != http.StatusCreated {
				t.Fatalf("write %s %d: %d %s", s, i, code, resp)
			}
		}
	}
	if r := run(t, secret, "cluster", "groups", "add", "--count", "2", "--node", nodes[1].addr); r.code != 0 {
		t.Fatalf("groups add: %v", r)
	}
	waitUntil(t, "groups 4 and 5 with a leader", 30*time.Second, func() bool {
		for _, g := range []uint64{4, 5} {
			if gs, ok := groupStatus(nodes[0], g); !ok || gs.Leader == 0 {
				return false
			}
		}
		return true
	})
	// One session moved into group 4, a new one placed in group 5.
	moved := hashed[0]
	var r result
	for try := 0; try < 30; try++ {
		if r = run(t, secret, "cluster", "move", "acme/"+moved, "--group", "4", "--node", nodes[0].addr); r.code == 0 {
			break
		}
		time.Sleep(time.Second) // the added group records its configuration first
	}
	if r.code != 0 {
		t.Fatalf("move to group 4: %v", r)
	}
	if r := run(t, secret, "cluster", "place", "acme/rg-placed", "--group", "5", "--node", nodes[2].addr); r.code != 0 {
		t.Fatalf("place in group 5: %v", r)
	}
	for i := range 3 {
		if code, resp := declareAgain(nodes, i, "rg-placed", fmt.Sprintf("placed-%d", i), fmt.Sprintf("placed %d", i)); code != http.StatusCreated {
			t.Fatalf("write to the placed session: %d %s", code, resp)
		}
	}
	want := map[string]int{hashed[0]: 5, hashed[1]: 5, "rg-placed": 3}

	file := filepath.Join(dir, "cluster.backup")
	if r := run(t, secret, "backup", "--to", file, "--node", nodes[1].addr); r.code != 0 {
		t.Fatalf("backup: %v", r)
	}
	for _, n := range nodes {
		n.stop()
	}
	data := filepath.Join(dir, "restored")
	if rs := run(t, runOpts{}, "restore", file, "--data", data, "--node-id", "1", "--raft-addr", nodes[0].raft, "--addr", nodes[0].addr); rs.code != 0 {
		t.Fatalf("restore: %v", rs)
	}
	n1 := &cnode{id: 1, raft: nodes[0].raft, addr: nodes[0].addr, gossip: nodes[0].gossip, data: data, restored: true}
	handMoved(n1)
	n1.start(t)
	defer n1.stop()
	keepLogs(t, []*cnode{n1})

	// The added groups again, and each session in its group again.
	waitUntil(t, "the restored cluster's four data groups, each with a leader", 60*time.Second, func() bool {
		for g := uint64(2); g <= 5; g++ {
			if gs, ok := groupStatus(n1, g); !ok || gs.Leader == 0 {
				return false
			}
		}
		return true
	})
	placed := func() map[string]string {
		r := run(t, secret, "cluster", "placements", "--node", n1.addr)
		out := map[string]string{}
		for _, line := range strings.Split(r.out, "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				out[f[0]] = f[1]
			}
		}
		return out
	}
	waitUntil(t, "the moved and the placed session in groups 4 and 5 again", 60*time.Second, func() bool {
		p := placed()
		return p["acme/"+moved] == "4" && p["acme/rg-placed"] == "5"
	})
	if p := placed(); len(p) != 3 { // the header, and the two
		t.Errorf("placements after the restore: %v", p)
	}
	for s, n := range want {
		if code, log := readEntries(n1.addr, s); code != 200 || len(log) != n {
			t.Errorf("%s on the restored cluster: %d, %d records, want %d", s, code, len(log), n)
		}
	}
	waitUntil(t, "the restore's groups file gone once made", 30*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(data, "restore-groups.json"))
		return os.IsNotExist(err)
	})
	// A write to the moved session goes to its group on the restored node.
	if code, resp := declareAgain([]*cnode{n1}, 0, moved, "after-restore", "after the restore"); code != http.StatusCreated {
		t.Fatalf("write after the restore: %d %s", code, resp)
	}
}
