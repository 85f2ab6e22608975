package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/replica"
)

// Concurrent clients append and read through every node of three while
// the leader of one session's group is killed (SIGKILL) and later
// restarted; porcupine checks the history against cluster/model's Linear
// (an append returns its position in the session, a read sees every append
// linearized before it), and afterwards every node holds each acknowledged
// append exactly once, at the sequence it was acknowledged with, in
// identical logs.
func TestClusterHistoryLinearizable(t *testing.T) {
	dir := t.TempDir()
	nodes := startCluster(t, dir)
	sessions := []string{"hist-a", "hist-b"}
	group := replica.GroupOf(cluster.DefaultGroups, "acme", sessions[0])
	victim := leaderOf(t, nodes, nodes[0], group)

	const clients, maxOps = 6, 120
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }
	deadline := start.Add(40 * time.Second)
	var (
		mu      sync.Mutex
		history []porcupine.Operation
		acked   = map[model.Op]uint64{} // append → its position
		done    atomic.Int64            // operations completed
	)
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		if in := op.Input.(model.Op); !in.Read {
			acked[in] = op.Output.(model.Out).Seq
		}
		mu.Unlock()
		done.Add(1)
	}
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(c), 13))
			for i := 0; i < maxOps; i++ {
				session := sessions[rng.IntN(len(sessions))]
				if rng.IntN(10) < 6 {
					// An append, retried under its key through the next node
					// until answered: one operation from its first call to
					// the answer.
					value, key := fmt.Sprintf("c%d-%d", c, i), fmt.Sprintf("hist-%d-%d", c, i)
					call := now()
					for try := c; ; try++ {
						if time.Now().After(deadline) {
							t.Errorf("client %d: append %s unanswered by the deadline", c, value)
							return
						}
						code, seq, resp := declareText(nodes[try%3].addr, session, key, value)
						if code == 201 {
							// Each write is its promise record and its request
							// record: the k-th promise is line 2k-1.
							record(porcupine.Operation{ClientId: c, Input: model.Op{Session: session, Value: value}, Call: call,
								Output: model.Out{Seq: (seq + 1) / 2}, Return: now()})
							break
						}
						if code != 0 && code != 503 {
							t.Errorf("client %d: append %s through node %d: %d %s", c, value, nodes[try%3].id, code, resp)
							return
						}
						time.Sleep(50 * time.Millisecond)
					}
					continue
				}
				// A read: an attempt that is refused saw nothing and is not
				// part of the history.
				for try := c; time.Now().Before(deadline); try++ {
					call := now()
					code, log := readEntries(nodes[try%3].addr, session)
					if code == 200 {
						record(porcupine.Operation{ClientId: c, Input: model.Op{Read: true, Session: session}, Call: call,
							Output: model.Out{Values: texts(log)}, Return: now()})
						break
					}
					if code != 0 && code != 503 {
						t.Errorf("client %d: read through node %d: %d", c, nodes[try%3].id, code)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		}(c)
	}
	// The kill a third of the way in, the restart a third later.
	waitUntil(t, "operations before the kill", 30*time.Second, func() bool { return done.Load() >= clients*maxOps/3 || t.Failed() })
	victim.kill9()
	killedAt := done.Load()
	waitUntil(t, "operations after the kill", 30*time.Second, func() bool {
		return done.Load() >= killedAt+clients*maxOps/4 || t.Failed()
	})
	victim.joinArgs = nil
	victim.start(t)
	restartedAt := done.Load()
	wg.Wait()
	if t.Failed() {
		return
	}
	waitCaughtUp(t, nodes)
	// A last read of each session through every node, the restarted one
	// included, joins the history.
	for _, n := range nodes {
		for _, s := range sessions {
			call := now()
			code, log := readEntries(n.addr, s)
			if code != 200 {
				t.Fatalf("final read of %s through node %d: %d", s, n.id, code)
			}
			history = append(history, porcupine.Operation{ClientId: clients + int(n.id), Input: model.Op{Read: true, Session: s}, Call: call,
				Output: model.Out{Values: texts(log)}, Return: now()})
		}
	}
	reads := 0
	for _, op := range history {
		if op.Input.(model.Op).Read {
			reads++
		}
	}
	t.Logf("killed node %d (leader of group %d) after %d operations, restarted it after %d; %d operations in all (%d appends, %d reads)",
		victim.id, group, killedAt, restartedAt, len(history), len(acked), reads)
	res, info := porcupine.CheckOperationsVerbose(model.Linear, history, 30*time.Second)
	if res != porcupine.Ok {
		path := dir + "/history.html"
		_ = porcupine.VisualizePath(model.Linear, info, path)
		t.Fatalf("the history is not linearizable (porcupine: %v); see %s", res, path)
	}

	// Every node: each acknowledged append once, at its sequence; the
	// same bytes everywhere.
	for _, n := range nodes {
		for _, s := range sessions {
			_, log := readEntries(n.addr, s)
			count := map[string]int{}
			for _, e := range log {
				count[e.Value]++
				if pos, ok := acked[model.Op{Session: s, Value: e.Value}]; ok && 2*pos-1 != e.Seq {
					t.Errorf("node %d: %s holds %q at seq %d, acknowledged at %d", n.id, s, e.Value, e.Seq, 2*pos-1)
				}
			}
			for op := range acked {
				if c := count[op.Value]; op.Session == s && c != 1 {
					t.Errorf("node %d: %s holds acknowledged %q %d times", n.id, s, op.Value, c)
				}
			}
		}
	}
	sameLogs(t, nodes)
}
