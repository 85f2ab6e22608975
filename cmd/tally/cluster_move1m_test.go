package main

// The 1M-event move figure (TALLY_E2E_MOVE1M=1): a session of a
// million events built fast, as an operator would bring one in (a pinki
// file imported into a ledger directory, backed up, and restored as the
// first node of a cluster), two more nodes joined, every data group at one
// voter, then the session moved to a group on another node while writers
// write to a session in each of the two groups. It logs the move's time
// against a raw read of the same bytes between two processes, its fenced
// time, and the other sessions' write p99 during the move against before
// it, then verifies the moved log on the destination's node.

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/cluster/replica"
)

func TestClusterMove1M(t *testing.T) {
	if os.Getenv("TALLY_E2E_MOVE1M") != "1" {
		t.Skip("the 1M-event move figure: TALLY_E2E_MOVE1M=1 (TALLY_E2E_MOVE_EVENTS=N for another size)")
	}
	events := 1000000
	if n, err := strconv.Atoi(os.Getenv("TALLY_E2E_MOVE_EVENTS")); err == nil && n > 0 {
		events = n
	}
	const groups = 4
	dir := t.TempDir()
	ledger := filepath.Join(dir, "ledger")
	step := func(what string, f func()) {
		t0 := time.Now()
		f()
		t.Logf("%s: %s", what, time.Since(t0).Round(time.Millisecond))
	}

	// The session, built fast: generated, imported, backed up, restored.
	file := filepath.Join(dir, "ledger.jsonl")
	step(fmt.Sprintf("generate %d events", events), func() {
		out, err := os.Create(file)
		if err != nil {
			t.Fatal(err)
		}
		gen := exec.Command("go", "run", "../../bench/gen", "pinki", "-n", strconv.Itoa(events))
		gen.Stdout, gen.Stderr = out, os.Stderr
		if err := gen.Run(); err != nil {
			t.Fatalf("bench/gen: %v", err)
		}
		out.Close()
	})
	step("import into a ledger directory", func() {
		runLong(t, "--dir", ledger, "init")
		runLong(t, "--dir", ledger, "--session", "acme/big", "import", file)
	})
	backupFile := filepath.Join(dir, "big.backup")
	step("back up", func() {
		runLong(t, "--dir", ledger, "backup", "--to", backupFile)
	})
	n1 := newCNode(t, dir, 1)
	step("restore as a cluster's first node", func() {
		runLong(t, "restore", backupFile, "--data", n1.data, "--node-id", "1", "--raft-addr", n1.raft, "--addr", n1.addr, "--groups", strconv.Itoa(groups))
	})
	os.Remove(file)
	n1.restored = true
	// TALLY_E2E_MOVE_REPLICAS=3: every group on every node, so the move
	// takes each node's own log (a shared install) rather than copy it.
	replicas := 1
	if os.Getenv("TALLY_E2E_MOVE_REPLICAS") == "3" {
		replicas = 3
	}
	n1.extra = []string{"--zone", "a", "--raft-tick", "50ms", "--spread=false", "--replicas", strconv.Itoa(replicas)}
	nodes := []*cnode{n1}
	step("start the restored node and join two more", func() {
		n1.start(t)
		for i, z := range []string{"b", "c"} {
			n := newCNode(t, dir, uint64(i+2), "--join", n1.addr)
			n.extra = []string{"--zone", z, "--raft-tick", "50ms", "--spread=false"}
			n.start(t)
			nodes = append(nodes, n)
		}
	})
	keepLogs(t, nodes)
	src := replica.GroupOf(groups, "acme", "big")
	voterOf := map[uint64]uint64{}
	// The destination: a group whose node never held the session (a node
	// the placement driver took a replica of its group from keeps a copy
	// of its log, which a move there would take instead of copying it).
	holdsCopy := func(id uint64) bool {
		_, err := os.Stat(filepath.Join(nodes[id-1].data, "ledger", "sessions", "acme", "big"))
		return err == nil
	}
	var dst uint64
	step("every data group at one voter, one on a node with no copy of the session", func() {
		waitUntil(t, "the data groups placed", 10*time.Minute, func() bool {
			st, ok := placedAt(n1, replicas)
			if !ok {
				return false
			}
			if replicas == 3 {
				dst = src%groups + 2
				voterOf[src], voterOf[dst] = 1, 2 // every node holds both: writers through nodes 1 and 2
				return true
			}
			clear(voterOf)
			for _, g := range st.Placement.Groups {
				if g.Group != 1 {
					voterOf[g.Group] = g.Voters[0].ID
				}
			}
			for g := uint64(2); g <= 1+groups; g++ {
				if voterOf[g] != voterOf[src] && !holdsCopy(voterOf[g]) {
					dst = g
					return true
				}
			}
			return false
		})
	})
	srcNode, dstNode := nodes[voterOf[src]-1], nodes[voterOf[dst]-1]

	writers := 16
	if n, err := strconv.Atoi(os.Getenv("TALLY_E2E_MOVE_WRITERS")); err == nil && n > 0 {
		writers = n
	}
	var lat latencies
	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]uint64{}
	for w := range writers {
		for _, o := range []struct {
			n       *cnode
			session string
		}{{srcNode, sessionOf("near", src)}, {dstNode, sessionOf("far", dst)}} {
			wg.Add(1)
			go timedWriter([]*cnode{o.n}, o.session, fmt.Sprintf("%s-w%d", o.session, w), &stop, &mu, acked, &lat, &wg)
		}
	}
	base := time.Now()
	time.Sleep(5 * time.Second) // the other sessions' p99 without a move
	moveAt := time.Now()
	r := run(t, secretEnv(), "cluster", "move", "acme/big", "--group", fmt.Sprint(dst), "--node", n1.addr, "--wait", "10m", "--json")
	movedAt := time.Now()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	var mv replica.Move
	if err := json.Unmarshal([]byte(r.out), &mv); r.code != 0 || err != nil || mv.From != src || mv.To != dst || (mv.Step != replica.MoveActivated && mv.Step != replica.MoveRetired) {
		t.Fatalf("move from group %d (node %d) to group %d (node %d): %v", src, srcNode.id, dst, dstNode.id, r)
	}
	n, raw := rawRead(t, dstNode, dst, "big", mv.Length)
	took := time.Duration(mv.Activated - mv.Began)
	without, nWithout := lat.p99(base, moveAt)
	during, nDuring := lat.p99(moveAt, movedAt)
	t.Logf("moved acme/big, %d records, %d bytes, from group %d (node %d) to group %d (node %d): begun to activated %s (%.1f MB/s), %d bytes copied before the fence; fenced %s",
		mv.Seq, mv.Length, src, srcNode.id, dst, dstNode.id, took, float64(mv.Length)/took.Seconds()/1e6, mv.Bytes, time.Duration(mv.Activated-mv.Fenced))
	t.Logf("a raw read of the same %d bytes between two processes (move-fetch): %s (%.1f MB/s): the move takes %.1fx as long (%.3fx the raw rate)",
		n, raw, float64(n)/raw.Seconds()/1e6, took.Seconds()/raw.Seconds(), raw.Seconds()/took.Seconds())
	t.Logf("other sessions' write p99 (groups %d and %d, %d writers each): %s in the 5 s before the move (%d writes), %s during it (%d writes): %.2fx",
		src, dst, writers, without, nWithout, during, nDuring, float64(during)/float64(max(without, 1)))
	if n != int64(mv.Length) {
		t.Errorf("raw read: %d bytes of %d", n, mv.Length)
	}
	if uint64(events) > mv.Seq {
		t.Errorf("the session held %d records at the fence, fewer than the %d events", mv.Seq, events)
	}
	// The moved log, whole, on the destination's node.
	step("verify the moved log on the destination's node", func() {
		t.Logf("tally verify: %s", runLong(t, "--dir", filepath.Join(dstNode.data, "ledger"), "--session", "acme/big", "verify"))
	})
}

// runLong runs tally without run's minute bound (an import of a million
// events takes longer here), failing the test unless it exits 0; it
// returns its output.
func runLong(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(tallyBin, args...)
	cmd.Env = baseEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tally %q: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}
