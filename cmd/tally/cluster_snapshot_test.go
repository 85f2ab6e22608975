package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/node"
	"tally/cluster/raftlog"
)

// A fourth node joining after 10,000 writes gets each data group as a
// snapshot (its raft store holds a snapshot at or past the index every
// write had committed at before it joined) and then holds every write: the
// same bytes in every session's log as the others, `tally verify` passing.
func TestClusterSnapshotToNewNode(t *testing.T) {
	const writes, clients = 10000, 32
	dir := t.TempDir()
	nodes := startCluster(t, dir)
	// Two sessions per data group, so every group has writes to send.
	var sessions []string
	for g := node.MetaGroup + 1; g <= node.MetaGroup+cluster.DefaultGroups; g++ {
		for k := 0; k < 2; k++ {
			sessions = append(sessions, sessionOf(fmt.Sprintf("snap-%d-%d", g, k), g))
		}
	}
	// The writers keep their connections (the shared client's pool is two
	// per host).
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(45 * time.Second)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := next.Add(1) - 1; i < writes; i = next.Add(1) - 1 {
				session, key := sessions[i%int64(len(sessions))], fmt.Sprintf("snap-%d", i)
				body := fmt.Sprintf(`{"promise":"w%d","to":"bob","until":"2h"}`, i)
				for try := c; ; try++ {
					if time.Now().After(deadline) {
						t.Errorf("write %d unanswered by the deadline", i)
						return
					}
					req, _ := http.NewRequest("POST", nodes[try%3].url()+"/v1/tenants/acme/sessions/"+session+"/promises", strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Tally-Actor", "alice")
					req.Header.Set("Idempotency-Key", key)
					res, err := hc.Do(req)
					if err == nil {
						res.Body.Close()
						if res.StatusCode == 201 {
							break
						}
						if res.StatusCode != 503 {
							t.Errorf("write %d: %d", i, res.StatusCode)
							return
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}(c)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	wrote := time.Since(start)
	waitCaughtUp(t, nodes)
	st, err := clusterStatus(nodes[0].addr)
	if err != nil {
		t.Fatal(err)
	}
	committed := map[uint64]uint64{}
	for _, g := range st.Groups {
		committed[g.Group] = g.Commit
	}

	n4 := newCNode(t, dir, 4, "--join", nodes[0].addr)
	joined := time.Now()
	n4.start(t)
	nodes = append(nodes, n4)
	waitCaughtUp(t, nodes)
	t.Logf("%d writes through 3 nodes in %v; node 4 joined and caught up in %v", writes, wrote.Round(time.Millisecond), time.Since(joined).Round(time.Millisecond))

	held := 0
	for _, s := range sessions {
		// Leadership moving to the new node may refuse a read (503): retry.
		waitUntil(t, "a read of "+s+" through node 4", 20*time.Second, func() bool {
			code, log := readEntries(n4.addr, s)
			held += len(log)
			return code == 200
		})
	}
	if held != writes {
		t.Errorf("node 4 holds %d promises, %d were written", held, writes)
	}
	if ref := sameLogs(t, nodes); len(ref) != len(sessions) {
		t.Errorf("node 1 holds %d sessions, want %d", len(ref), len(sessions))
	}

	// How node 4 got there: it counts a snapshot installed for each data
	// group at least, and its raft store holds each one's.
	if got := metricValue(t, n4, "tally_cluster_snapshots_installed_total"); got < cluster.DefaultGroups {
		t.Errorf("node 4 installed %v snapshots, want one for each of the %d data groups at least", got, cluster.DefaultGroups)
	}
	n4.stop()
	db, err := raftlog.Open(filepath.Join(n4.data, "raft"), raftlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for g := node.MetaGroup + 1; g <= node.MetaGroup+cluster.DefaultGroups; g++ {
		s, err := db.Group(g)
		if err != nil {
			t.Fatal(err)
		}
		snap, _ := s.Snapshot()
		if idx := snap.GetMetadata().GetIndex(); idx < committed[g] {
			t.Errorf("group %d: node 4's snapshot is at index %d, the writes had committed through %d before it joined", g, idx, committed[g])
		}
	}
}

// metricValue reads one metric from a node's /metrics.
func metricValue(t *testing.T, n *cnode, name string) float64 {
	t.Helper()
	text, err := metricsText(n.url())
	if err != nil {
		t.Fatal(err)
	}
	v, ok := sampleSum(text, name, "")
	if !ok {
		t.Fatalf("node %d's /metrics has no %s", n.id, name)
	}
	return v
}
