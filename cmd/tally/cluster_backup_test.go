package main

// Backup and restore of a cluster with the real binaries on 127.0.0.1: a
// backup through one node of three holds every write acknowledged before
// it; restored, it is a new incarnation (a new cluster id) whose first node
// holds those writes once each with the same chains, a node joining it
// gets them by snapshot, and the old cluster's nodes are refused.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// writeThrough declares text in session under key through the nodes in
// turn, from nodes[start], until one acknowledges it (a retry under the
// same key runs it at most once).
func writeThrough(t *testing.T, nodes []*cnode, start int, session, key, text string) {
	t.Helper()
	for try := 0; try < 60; try++ {
		n := nodes[(start+try)%len(nodes)]
		code, _, resp := declareText(n.addr, session, key, text)
		if code == 201 {
			return
		}
		if code != 0 && code != 503 {
			t.Fatalf("%s through node %d: %d %s", key, n.id, code, resp)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s: not acknowledged through any node", key)
}

// groupsServed reports whether every group n reports has a leader and is
// placed as a cluster of members nodes wants it (groupsAt).
func groupsServed(n *cnode, members int) bool {
	st, err := clusterStatus(n.addr)
	return err == nil && groupsAt(st, members)
}

func TestClusterBackupRestoresANewIncarnation(t *testing.T) {
	dir := t.TempDir()
	nodes := startCluster(t, dir)
	oldID := func() string {
		st, err := clusterStatus(nodes[0].addr)
		if err != nil {
			t.Fatal(err)
		}
		return st.ClusterID
	}()
	var sessions []string
	for _, g := range []uint64{2, 4, 6, 9} {
		sessions = append(sessions, sessionOf("bk", g))
	}
	// Writes through every node, before the backup.
	before := map[string][]string{}
	for i := 0; i < 32; i++ {
		s := sessions[i%len(sessions)]
		text := fmt.Sprintf("before %d", i)
		writeThrough(t, nodes, i, s, fmt.Sprintf("b-%d", i), text)
		before[s] = append(before[s], text)
	}

	file := filepath.Join(dir, "cluster.backup")
	secret := []string{"TALLY_JOIN_SECRET=" + clusterSecret}
	if r := run(t, runOpts{}, "backup", "--to", file, "--node", nodes[1].addr, "--join-secret", "not the secret of this cluster"); r.code != 1 || !strings.Contains(r.err, "not signed with this cluster's join secret") {
		t.Fatalf("a backup with another secret: %v", r)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a refused backup left %s: %v", file, err)
	}
	r := run(t, runOpts{env: secret}, "backup", "--to", file, "--node", nodes[1].addr, "--json")
	if r.code != 0 {
		t.Fatalf("backup through node 2: %v", r)
	}
	taken := readBackupDoc(t, r)
	if taken.Source.Kind != "cluster" || taken.Source.ClusterID != oldID {
		t.Fatalf("backup source %+v, want cluster %s", taken.Source, oldID)
	}

	// Writes after the backup: the restored cluster lacks them.
	var after []string
	for i := 0; i < 12; i++ {
		s := sessions[i%len(sessions)]
		text := fmt.Sprintf("after %d", i)
		writeThrough(t, nodes, i, s, fmt.Sprintf("a-%d", i), text)
		after = append(after, s+"|"+text)
	}
	oldLogs := sameLogs(t, nodes)
	for _, n := range nodes {
		n.stop()
	}

	// Restore as the first node of a new cluster, on node 1's addresses.
	data := filepath.Join(dir, "restored")
	rs := run(t, runOpts{}, "restore", file, "--data", data, "--node-id", "1", "--raft-addr", nodes[0].raft, "--addr", nodes[0].addr, "--json")
	if rs.code != 0 {
		t.Fatalf("restore: %v", rs)
	}
	restored := readBackupDoc(t, rs)
	if fmt.Sprint(restored.seqs()) != fmt.Sprint(taken.seqs()) || len(restored.Sessions) != len(sessions) {
		t.Fatalf("restored to %v, backed up %v", restored.seqs(), taken.seqs())
	}
	if restored.ClusterID == "" || restored.ClusterID == oldID {
		t.Fatalf("the restored cluster's id %q (the old one %s)", restored.ClusterID, oldID)
	}
	human := run(t, runOpts{}, "backup", "verify", file)
	if human.code != 0 || !strings.Contains(human.out, "backup of cluster "+oldID) {
		t.Fatalf("verify: %v", human)
	}

	n1 := &cnode{id: 1, raft: nodes[0].raft, addr: nodes[0].addr, gossip: nodes[0].gossip, data: data, restored: true}
	n1.start(t)
	waitUntil(t, "a leader in every group of the restored cluster", 30*time.Second, func() bool { return groupsServed(n1, 1) })
	st, err := clusterStatus(n1.addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.ClusterID != restored.ClusterID || st.Restored == nil || st.Restored.ClusterID != oldID || !st.Restored.Created.Equal(taken.Created) {
		t.Fatalf("the restored node's status: cluster %s, restored %+v", st.ClusterID, st.Restored)
	}
	if r := run(t, runOpts{}, "cluster", "status", "--node", n1.addr); r.code != 0 || !strings.Contains(r.out, "restored from a backup of cluster "+oldID) {
		t.Fatalf("cluster status on the restored node: %v", r)
	}
	// Every write acknowledged before the backup, once, with the chain
	// the old cluster had; none of those after.
	for _, s := range sessions {
		code, entries := readEntries(n1.addr, s)
		if code != 200 {
			t.Fatalf("read %s: %d", s, code)
		}
		got := texts(entries)
		for _, text := range before[s] {
			if n := strings.Count("\x00"+strings.Join(got, "\x00")+"\x00", "\x00"+text+"\x00"); n != 1 {
				t.Errorf("session %s: %q, acknowledged before the backup, is there %d times", s, text, n)
			}
		}
		for _, a := range after {
			if as, text, _ := strings.Cut(a, "|"); as == s && slices.Contains(got, text) {
				t.Errorf("session %s: %q, written after the backup, was restored", s, text)
			}
		}
	}
	newLogs := nodeLogs(t, n1)
	for name, b := range newLogs {
		if seq := uint64(bytes.Count(b, []byte{'\n'})); seq != taken.seqs()[name] {
			t.Errorf("session %s: %d lines, the backup printed seq %d", name, seq, taken.seqs()[name])
		}
		if !bytes.HasPrefix(oldLogs[name], b) {
			t.Errorf("session %s: the restored chain is not the old cluster's", name)
		}
	}

	// A second node joins the new incarnation and installs its sessions.
	n4 := newCNode(t, dir, 4, "--join", n1.addr)
	n4.start(t)
	waitUntil(t, "two voters in every group", 30*time.Second, func() bool { return groupsServed(n1, 2) })
	writeThrough(t, []*cnode{n4, n1}, 0, sessions[0], "new-1", "after the restore")
	waitUntil(t, "the joiner holding the restored chains", 30*time.Second, func() bool {
		a, b := nodeLogs(t, n1), nodeLogs(t, n4)
		return len(a) == len(b) && bytes.Equal(a["acme/"+sessions[0]], b["acme/"+sessions[0]]) && bytes.Equal(a["acme/"+sessions[1]], b["acme/"+sessions[1]])
	})
	sameLogs(t, []*cnode{n1, n4})
	if metricValue(t, n4, "tally_cluster_snapshots_installed_total") == 0 {
		t.Error("the joiner installed no snapshot")
	}

	// The old cluster's nodes are refused: node 2 restarted as it was
	// started (--join node 1's address, now the new incarnation's) stops
	// at the join check; node 3 restarted without --join reaches node 1's
	// raft address and is refused at the handshake.
	old2 := nodes[1]
	args := []string{"serve", "--cluster", "--insecure-dev", "--node-id", "2", "--raft-addr", old2.raft, "--addr", old2.addr,
		"--data", old2.data, "--join-secret", clusterSecret, "--join", n1.addr}
	if r := run(t, runOpts{}, args...); r.code != 1 || !strings.Contains(r.err, "WrongCluster") || !strings.Contains(r.err, "restored from a backup of cluster "+oldID) {
		t.Fatalf("old node 2 joining the restored cluster: %v", r)
	}
	old3 := nodes[2]
	old3.joinArgs = nil
	old3.start(t)
	waitUntil(t, "old node 3 refused by the restored node's transport", 30*time.Second, func() bool {
		return metricValue(t, n1, "tally_cluster_refused_peers_total") > 0
	})
	old3.stop()
	if st, err := clusterStatus(n1.addr); err != nil || len(st.Members) != 2 || st.Members[0].ID != 1 || st.Members[1].ID != 4 {
		t.Fatalf("the restored cluster's members: %+v (%v)", st.Members, err)
	}
	n4.stop()
	n1.stop()
}
