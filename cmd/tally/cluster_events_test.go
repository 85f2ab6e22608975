package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// follow reads a session's event stream from a node, after seq, calling
// got with each record's sequence and line, until the stream ends or ctx
// does; it reports whether the stream was open at all.
func follow(ctx context.Context, n *cnode, session string, after uint64, got func(seq uint64, line string)) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", n.url()+"/v1/tenants/acme/sessions/"+session+"/events", nil)
	if err != nil {
		return false
	}
	req.Header.Set("Last-Event-ID", strconv.FormatUint(after, 10))
	req.Header.Set("X-Tally-Actor", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return false
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var seq uint64
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			seq, _ = strconv.ParseUint(strings.TrimPrefix(line, "id: "), 10, 64)
		case strings.HasPrefix(line, "data: ") && seq > 0:
			got(seq, strings.TrimPrefix(line, "data: "))
			seq = 0
		}
	}
	return true
}

// The event stream works from any node and across a failover: a reader
// follows a session through a node while writes go through every node and
// the group's leader is killed; when its node dies it resumes at another
// with Last-Event-ID. It receives every record once, in sequence order
// with no gap, the same lines every node's log holds, and every
// acknowledged write among them.
func TestClusterEventStreamAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process cluster test")
	}
	nodes := startCluster(t, t.TempDir())
	const session = "events"
	leader := leaderOf(t, nodes, nodes[0], replica.GroupOf(cluster.DefaultGroups, "acme", session))
	// The reader starts at the leader, so the kill takes its node too.
	reader := leader

	var mu sync.Mutex
	var seqs []uint64
	var lines []string
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		at, tries := reader, 0
		for ctx.Err() == nil && tries < 200 {
			mu.Lock()
			last := uint64(0)
			if len(seqs) > 0 {
				last = seqs[len(seqs)-1]
			}
			mu.Unlock()
			follow(ctx, at, session, last, func(seq uint64, line string) {
				mu.Lock()
				seqs, lines = append(seqs, seq), append(lines, line)
				mu.Unlock()
			})
			// The node went away (or the session is not there yet): go on
			// at the next one.
			tries++
			at = nodes[(int(at.id))%len(nodes)]
			if at == leader && leaderKilled(leader) {
				at = nodes[(int(at.id))%len(nodes)]
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()

	var acked sync.Map // request id → seq
	write := func(w, i int) {
		key := fmt.Sprintf("w%d-%d", w, i)
		for try := 0; try < 100; try++ {
			n := nodes[(w+try)%len(nodes)]
			if leaderKilled(n) {
				continue
			}
			code, seq, _ := declareText(n.addr, session, key, key)
			if code == 201 {
				acked.Store(key, seq)
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("write %s never acknowledged", key)
	}
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if w == 0 && i == 15 {
					leader.cmd.Process.Kill()
					<-leader.exited
				}
				write(w, i)
			}
		}(w)
	}
	wg.Wait()
	var live []*cnode
	for _, n := range nodes {
		if !leaderKilled(n) {
			live = append(live, n)
		}
	}
	want, last := 0, uint64(0)
	acked.Range(func(_, v any) bool { want, last = want+1, max(last, v.(uint64)); return true })
	waitUntil(t, "the reader to reach the last acknowledged write", 30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seqs) > 0 && seqs[len(seqs)-1] >= last
	})
	cancel()
	<-readerDone
	waitCaughtUp(t, live)
	logs := sameLogs(t, live)
	log := logs["acme/"+session]
	mu.Lock()
	defer mu.Unlock()
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("event %d has sequence %d: a gap or a duplicate (%v…)", i, s, seqs[max(0, i-3):i+1])
		}
		if !strings.Contains(string(log), lines[i]+"\n") {
			t.Fatalf("event %d is not a line of the log every node holds: %s", s, lines[i])
		}
	}
	acked.Range(func(k, v any) bool {
		if seq := v.(uint64); seq == 0 || seq > uint64(len(seqs)) || !strings.Contains(lines[seq-1], k.(string)) {
			t.Errorf("acknowledged write %s (sequence %d) is not the event at its sequence", k, seq)
		}
		return true
	})
	t.Logf("%d events, %d acknowledged writes, the reader's node killed after 15", len(seqs), want)
}

// leaderKilled reports whether the node's process has exited.
func leaderKilled(n *cnode) bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}
