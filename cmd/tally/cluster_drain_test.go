package main

// A node drained under 64 concurrent writers, then removed: no write
// acknowledged is lost or doubled, each session's log is the same bytes
// on every current voter of its group, and every node's ledger verifies
// whole.

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestClusterDrainUnderWriters(t *testing.T) {
	dir := t.TempDir()
	nodes := startPlaced(t, dir, []string{"a", "b", "c", "c"}, "--replicas", "3")
	waitUntil(t, "every data group at 3 voters", 60*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3)
		return ok
	})

	// 64 writers over 16 sessions, through nodes 1 to 3; each retries its
	// write (the same idempotency key) until it is acknowledged.
	const writers, sessions = 64, 16
	var (
		stop  atomic.Bool
		total atomic.Int64
		mu    sync.Mutex
		acked = map[string][]string{}
		wg    sync.WaitGroup
	)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			session := fmt.Sprintf("d%d", w%sessions)
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%02d-%05d", w, i)
				deadline := time.Now().Add(30 * time.Second)
				for try := 0; !placedWrite(nodes[(w+try)%3].addr, session, key); try++ {
					if time.Now().After(deadline) {
						t.Errorf("write %s to %s not acknowledged in 30 s", key, session)
						return
					}
					time.Sleep(50 * time.Millisecond)
				}
				mu.Lock()
				acked[session] = append(acked[session], key)
				mu.Unlock()
				total.Add(1)
			}
		}()
	}
	waitUntil(t, "writes under way", 30*time.Second, func() bool { return total.Load() >= 200 })
	if r := run(t, secretEnv(), "cluster", "drain", "4", "--node", nodes[0].addr); r.code != 0 {
		stop.Store(true)
		wg.Wait()
		t.Fatalf("drain 4: %v", r)
	}
	drained := time.Now()
	waitUntil(t, "no data group on node 4", 90*time.Second, func() bool {
		_, ok := placedAt(nodes[0], 3, 4)
		return ok
	})
	t.Logf("drained in %v under %d writers", time.Since(drained).Round(time.Millisecond), writers)
	before := total.Load()
	waitUntil(t, "writes after the drain", 30*time.Second, func() bool { return total.Load() >= before+64 })
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}
	if r := run(t, secretEnv(), "cluster", "remove-node", "4", "--node", nodes[0].addr); r.code != 0 {
		t.Fatalf("remove-node 4 after its drain: %v", r)
	}
	t.Logf("%d writes acknowledged", total.Load())

	// Every acknowledged write read back once, none more.
	for session, keys := range acked {
		code, got := readPlaced(nodes[1].addr, session)
		if code != http.StatusOK {
			t.Fatalf("read %s: %d", session, code)
		}
		slices.Sort(got)
		slices.Sort(keys)
		if !slices.Equal(got, keys) {
			t.Fatalf("session %s holds %d promises, want the %d acknowledged, each once", session, len(got), len(keys))
		}
	}
	// The same bytes on every current voter; every ledger verifies.
	live := nodes[:3]
	waitUntil(t, "each session's log the same on every voter of its group", 30*time.Second, func() bool {
		st, ok := placedAt(nodes[0], 3, 4)
		if !ok {
			return false
		}
		return votersDiffer(t, live, st, acked) == ""
	})
}
