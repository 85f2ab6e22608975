package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"tally/api"
	"tally/client"
	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/replica"
	"tally/promise"
	"tally/service"
)

// outcomes is an HTTP transport that counts the answers of unknown
// outcome (503 UnknownOutcome) by the request id they answered, and the
// sends of each request id, as the client makes them.
type outcomes struct {
	mu      sync.Mutex
	unknown map[string]int // request id → answers of unknown outcome
	sends   map[string]int // request id → sends
	// misnamed are the answers of unknown outcome that do not name the
	// request id they answered.
	misnamed []string
}

func (o *outcomes) RoundTrip(req *http.Request) (*http.Response, error) {
	key := req.Header.Get("Idempotency-Key")
	if key != "" { // a read carries none
		o.mu.Lock()
		o.sends[key]++
		o.mu.Unlock()
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusServiceUnavailable {
		return res, err
	}
	b, err := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(b))
	var doc struct {
		Error, Code string
		RequestID   string `json:"request_id"`
	}
	if err == nil && json.Unmarshal(b, &doc) == nil && doc.Code == service.CodeUnknownOutcome {
		o.mu.Lock()
		o.unknown[key]++
		if doc.RequestID != key || !strings.Contains(doc.Error, fmt.Sprintf("retry it with the same request id %q", key)) {
			o.misnamed = append(o.misnamed, string(b))
		}
		o.mu.Unlock()
	}
	return res, nil
}

// A group's leader frozen (SIGSTOP) for some seconds under 8 writers that
// write through the client package, giving no request id: the writes the
// frozen leader held are answered "unknown outcome" (503 UnknownOutcome),
// the client sends each again under the request id it gave it, and at the
// end every acknowledged write is in the session's log exactly once on
// every node, no write twice, and the history (writes and reads) is
// linearizable.
func TestClusterFrozenLeaderUnknownOutcome(t *testing.T) {
	nodes := startCluster(t, t.TempDir())
	const (
		session   = "frozen"
		writers   = 8
		frozenFor = 4 * time.Second
		afterWake = 40 // acknowledged writes sent after the leader woke
	)
	group := replica.GroupOf(cluster.DefaultGroups, "acme", session)
	leader := leaderOf(t, nodes, nodes[0], group)
	tr := &outcomes{unknown: map[string]int{}, sends: map[string]int{}}
	clients := make([]*client.Client, len(nodes))
	for i, n := range nodes {
		c, err := client.New(client.Config{URL: n.url(), HTTP: &http.Client{Transport: tr}, Timeout: 45 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
	}
	call := service.Call{Tenant: "acme", Session: session, Actor: "alice"}

	var (
		mu      sync.Mutex
		history []porcupine.Operation
		acked   = map[string]uint64{} // text → its record's sequence
		woke    time.Time
		late    int // acknowledged writes sent after the leader woke
		stop    atomic.Bool
		wg      sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := clients[w%len(clients)]
			for j := 0; !stop.Load() && ctx.Err() == nil; j++ {
				text := fmt.Sprintf("w%d-%d", w, j)
				mu.Lock()
				sentAwake := !woke.IsZero()
				mu.Unlock()
				called := time.Now()
				res, err := c.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: text, To: "bob", Until: "2h"})
				if err != nil {
					t.Errorf("writer %d: %s: %v", w, text, err)
					return
				}
				mu.Lock()
				// Each write is its promise record and its request record
				// (every write carries a request id): the k-th promise is
				// line 2k-1.
				history = append(history, porcupine.Operation{ClientId: w, Input: model.Op{Session: session, Value: text},
					Call: called.UnixNano(), Output: model.Out{Seq: (res.Seq + 1) / 2}, Return: time.Now().UnixNano()})
				acked[text] = res.Seq
				if sentAwake {
					late++
				}
				mu.Unlock()
			}
		}(w)
	}
	// A reader through every node in turn.
	wg.Add(1)
	go func() {
		defer wg.Done()
		stopped := func() bool { return stop.Load() || ctx.Err() != nil }
		readHistory(stopped, &mu, &history, writers, session, func(r int) ([]string, bool) {
			l, err := clients[r%len(clients)].ListPromises(ctx, call, promise.Filter{State: "all"})
			if err != nil {
				return nil, false
			}
			var values []string
			for _, p := range l.Promises {
				values = append(values, p.Promise)
			}
			return values, true
		})
	}()

	waitUntil(t, "writes acknowledged before the freeze", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 20 || t.Failed()
	})
	if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozeAt := time.Now()
	time.Sleep(frozenFor) // the fault itself: the leader frozen this long
	if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	woke = time.Now()
	mu.Unlock()
	waitUntil(t, "writes sent after the leader woke acknowledged", 60*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return late >= afterWake || t.Failed()
	})
	stop.Store(true)
	wg.Wait()
	if t.Failed() {
		return
	}

	// The answers of unknown outcome, each retried by the client under its
	// request id until it was answered.
	tr.mu.Lock()
	unknown, retried := 0, 0
	for key, n := range tr.unknown {
		unknown += n
		if tr.sends[key] > n {
			retried++
		}
	}
	writes, misnamed, answered := len(tr.sends), tr.misnamed, len(tr.unknown)
	tr.mu.Unlock()
	if len(misnamed) > 0 {
		t.Errorf("answers of unknown outcome that do not name their request id: %q", misnamed)
	}
	mu.Lock()
	n := len(acked)
	mu.Unlock()
	t.Logf("node %d (leader of group %d) frozen %v at %v; %d writes acknowledged, %d request ids sent (the client's own); %d answers of unknown outcome to %d writes, each sent again under its id",
		leader.id, group, frozenFor, frozeAt.Format(time.TimeOnly), n, writes, unknown, retried)
	if unknown == 0 || retried != answered {
		t.Errorf("%d answers of unknown outcome, %d writes retried of %d answered so: the frozen leader's writes must be answered UnknownOutcome and sent again", unknown, retried, answered)
	}

	res := porcupine.CheckOperationsTimeout(model.Linear, history, 20*time.Second)
	if res == porcupine.Illegal {
		t.Fatalf("the history of %d operations is not linearizable", len(history))
	}
	t.Logf("porcupine: %d operations: %s", len(history), res)

	// Every node: each acknowledged write exactly once, no write twice,
	// the same bytes everywhere.
	waitCaughtUp(t, nodes)
	for name, b := range sameLogs(t, nodes) {
		if name != "acme/"+session {
			continue
		}
		declared := declaredIn(t, name, b)
		for text, c := range declared {
			if c != 1 {
				t.Errorf("%q is in the log %d times", text, c)
			}
			if _, ok := acked[text]; !ok {
				t.Errorf("%q is in the log but was never acknowledged", text)
			}
		}
		for text := range acked {
			if declared[text] != 1 {
				t.Errorf("acknowledged %q is in the log %d times", text, declared[text])
			}
		}
	}
}
