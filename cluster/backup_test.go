package cluster

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/api"
	"tally/backup"
	"tally/cluster/replica"
	"tally/cluster/transport"
	"tally/internal/proctest"
	"tally/ledger"
	"tally/promise"
	"tally/service"
	"tally/store"
)

// takeBackup asks node n for a backup signed with secret at at.
func takeBackup(t *testing.T, n *testNode, secret string, at time.Time) (int, []byte, http.Header) {
	t.Helper()
	return takeSigned(t, n, SignBackup(secret, n.target(), at))
}

// A backup streamed by a node holds every acknowledged write; restored, it
// is a new cluster whose first start bootstraps it with those sessions,
// which a node joining later installs by snapshot; the old cluster's nodes
// are refused by the join and by the transport.
func TestBackupRestoresANewIncarnation(t *testing.T) {
	dir := t.TempDir()
	c1 := nodeConfig(t, dir, 1)
	c1.Bootstrap = true
	n1 := startNode(t, c1)
	stopped := false
	defer func() {
		if !stopped {
			n1.stop(t)
		}
	}()
	waitFor(t, "a voter in every group", 20*time.Second, func() bool { return allVoters(n1.Node, 1) })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	write := func(n *Node, session string, i int) {
		t.Helper()
		call := service.Call{Tenant: "acme", Session: session, Actor: "alice", RequestID: fmt.Sprintf("r%d", i)}
		if _, err := n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: fmt.Sprint("p", i), To: "bob", Until: "2h"}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	for i := 0; i < 24; i++ {
		write(n1.Node, fmt.Sprintf("s%d", i%4), i)
	}
	before := chainHeads(t, n1.Node)

	if code, body, _ := takeBackup(t, n1, "another secret of some length", time.Now()); code != 403 || !strings.Contains(string(body), "WrongJoinSecret") {
		t.Fatalf("a backup signed with another secret: %d %s", code, body)
	}
	if code, body, _ := takeBackup(t, n1, c1.Secret, time.Now().Add(-time.Hour)); code != 403 || !strings.Contains(string(body), CodeStaleRequest) {
		t.Fatalf("a backup signed an hour ago: %d %s", code, body)
	}
	code, file, trailer := takeBackup(t, n1, c1.Secret, time.Now())
	if code != 200 || trailer.Get(BackupErrorTrailer) != "" {
		t.Fatalf("backup: %d %s (trailer %q)", code, file, trailer.Get(BackupErrorTrailer))
	}
	sum, err := backup.Verify(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if src := sum.Header.Source; src.Kind != backup.SourceCluster || src.ClusterID != n1.ClusterID() || src.NodeID != 1 || src.Groups != 4 {
		t.Fatalf("source %+v", src)
	}
	for _, c := range sum.Sessions {
		if p := before[c.Name()]; p.Seq != c.Seq || p.Hash != c.Hash {
			t.Fatalf("session %s cut at %d, the node held %d", c.Name(), c.Seq, p.Seq)
		}
	}
	if len(sum.Sessions) != len(before) {
		t.Fatalf("%d sessions in the backup, %d on the node", len(sum.Sessions), len(before))
	}
	write(n1.Node, "s0", 100) // after the backup: not restored

	data := filepath.Join(dir, "restored")
	if _, _, err := Restore(ctx, bytes.NewReader(file), RestoreConfig{Data: data, Member: replica.Member{ID: 7}, Groups: 2}); err != nil {
		t.Fatal(err)
	}
	rc := nodeConfig(t, dir, 7)
	rc.Data = data
	wrong := rc
	wrong.NodeID = 8
	if _, err := Start(ctx, wrong); err == nil || !strings.Contains(err.Error(), "restored as node 7") {
		t.Fatalf("the restored node started under another id: %v", err)
	}
	r1 := startNode(t, rc)
	defer r1.stop(t)
	if r1.ClusterID() == n1.ClusterID() {
		t.Fatal("the restored cluster kept the old cluster's id")
	}
	if _, err := os.Stat(filepath.Join(data, restoreName)); !os.IsNotExist(err) {
		t.Fatalf("restore.json after the first start: %v", err)
	}
	st, err := r1.Status(ctx)
	if err != nil || st.Restored == nil || st.Restored.ClusterID != n1.ClusterID() || !st.Restored.Created.Equal(sum.Header.Created) {
		t.Fatalf("status %+v: %v", st.Restored, err)
	}
	waitFor(t, "a voter in every group of the restored cluster", 20*time.Second, func() bool { return allVoters(r1.Node, 1) })
	if got := chainHeads(t, r1.Node); !equalHeads(got, before) {
		t.Fatalf("restored chains %v, backed up %v", got, before)
	}
	write(r1.Node, "s1", 200)
	if got := chainHeads(t, r1.Node)["acme/s1"]; got.Seq != before["acme/s1"].Seq+2 {
		t.Fatalf("a write after the restore went to line %d", got.Seq)
	}

	// A node joining the restored cluster installs its sessions.
	j := nodeConfig(t, dir, 9)
	j.Join = rc.Addr
	r2 := startNode(t, j)
	defer r2.stop(t)
	waitFor(t, "two voters in every group", 20*time.Second, func() bool { return allVoters(r1.Node, 2) })
	waitFor(t, "the joiner holding the restored chains", 20*time.Second, func() bool {
		return equalHeads(chainHeads(t, r1.Node), chainHeads(t, r2.Node))
	})

	// The old cluster's node is refused: restarted with --join to the new
	// one, and at the transport.
	n1.stop(t)
	stopped = true
	old := c1
	old.Bootstrap, old.Join = false, rc.Addr
	if _, err := Start(ctx, old); err == nil || !strings.Contains(err.Error(), CodeWrongCluster) || !strings.Contains(err.Error(), "restored from a backup of cluster "+n1.ClusterID()) {
		t.Fatalf("the old node joining the restored cluster: %v", err)
	}
	tc := transport.DefaultConfig()
	tc.NodeID, tc.ClusterID, tc.Secret, tc.Listen = 1, n1.ClusterID(), []byte(c1.Secret), proctest.FreeAddr(t)
	tr, err := transport.Listen(tc, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tr.AddPeer(7, rc.RaftAddr) // it dials at once, and again
	waitFor(t, "the old cluster's peer refused", 10*time.Second, func() bool { return r1.tr.Stats.RefusedPeers.Load() > 0 })
}

// A ledger directory's backup restores into a cluster too: its sessions
// spread over the new cluster's groups and read as they were written.
func TestRestoreALedgerBackupIntoACluster(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	cfg := ledger.DefaultConfig()
	cfg.Logger = slog.New(slog.DiscardHandler)
	for i := 0; i < 6; i++ {
		sd, _ := store.SessionDir(root, "acme", fmt.Sprintf("s%d", i%3))
		l, err := ledger.Open(sd, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.Submit(context.Background(), promise.Declare{Text: fmt.Sprint("p", i), By: "alice", To: "bob", Until: time.Now().Add(time.Hour)}, ledger.WriteOptions{Actor: "alice"}); err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	var buf bytes.Buffer
	h := backup.Header{Tally: "test", Created: time.Now(), Source: backup.Source{Kind: backup.SourceLedger}}
	if _, err := backup.Take(context.Background(), &buf, h, root, backup.SettledCut); err != nil {
		t.Fatal(err)
	}
	c := nodeConfig(t, dir, 1)
	_, sum, err := Restore(context.Background(), &buf, RestoreConfig{Data: c.Data, Member: replica.Member{ID: 1, Addr: c.Addr}, Groups: c.Groups})
	if err != nil || len(sum.Sessions) != 3 {
		t.Fatalf("restore: %+v %v", sum, err)
	}
	if m, ok, err := PendingMember(c.Data); err != nil || !ok || m.Addr != c.Addr {
		t.Fatalf("pending member %+v %v %v", m, ok, err)
	}
	n := startNode(t, c)
	defer n.stop(t)
	for s := 0; s < 3; s++ {
		call := service.Call{Tenant: "acme", Session: fmt.Sprintf("s%d", s), Actor: "alice"}
		waitFor(t, "two promises read in "+call.Session, 20*time.Second, func() bool {
			list, err := n.ListPromises(context.Background(), call, promise.Filter{})
			return err == nil && len(list.Promises) == 2
		})
	}
}
