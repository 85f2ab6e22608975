package main

// -liveness: the failure detector's figures. A non-leader node stopped
// with SIGSTOP: the time until the meta group's leader shows it suspect,
// and until it is settled dead (then SIGCONT, and wait until it is
// settled alive again), -stops times; and the failure detector's bytes
// sent per node per second, idle, at each cluster size.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"tally/bench/internal/benchproc"
	"tally/cluster"
	"tally/cluster/replica"
)

func members(addr string) (cluster.Members, error) {
	return benchproc.GetJSON[cluster.Members](client, "http://"+addr+cluster.MembersPath)
}

// gossipBytes is a node's tally_liveness_gossip_sent_bytes_total.
func gossipBytes(addr string) (float64, error) {
	res, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "tally_liveness_gossip_sent_bytes_total "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, errors.New("no tally_liveness_gossip_sent_bytes_total")
}

// startN starts an n-node cluster under dir.
func startN(bin, dir string, n int) ([]*proc, error) {
	n1 := clusterNode(dir, 1, "--bootstrap")
	keepLog(n1, dir)
	if err := n1.start(bin); err != nil {
		return nil, err
	}
	nodes := []*proc{n1}
	for id := uint64(2); id <= uint64(n); id++ {
		p := clusterNode(dir, id, "--join", n1.addr)
		keepLog(p, dir)
		if err := p.start(bin); err != nil {
			stopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, p)
	}
	return nodes, waitSettled(nodes, 60*time.Second)
}

// keepLog sends a node's log to dir/nN.log (kept when the run fails).
func keepLog(p *proc, dir string) {
	if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("n%d.log", p.id))); err == nil {
		p.stderr = f
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func livenessBench(bin string, sizes []int, stops int, idle time.Duration) error {
	for _, size := range sizes {
		dir, err := os.MkdirTemp("", "tally-liveness-bench")
		if err != nil {
			return err
		}
		nodes, err := startN(bin, dir, size)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		err = livenessRun(nodes, size, stops, idle)
		stopAll(nodes)
		if err != nil {
			return fmt.Errorf("%w (the nodes' logs: %s)", err, dir)
		}
		os.RemoveAll(dir)
	}
	return nil
}

func livenessRun(nodes []*proc, size, stops int, idle time.Duration) error {
	// Idle gossip: every node's bytes over the same window.
	before := make([]float64, len(nodes))
	for i, n := range nodes {
		b, err := gossipBytes(n.addr)
		if err != nil {
			return err
		}
		before[i] = b
	}
	time.Sleep(idle)
	var total float64
	for i, n := range nodes {
		b, err := gossipBytes(n.addr)
		if err != nil {
			return err
		}
		total += b - before[i]
	}
	fmt.Printf("nodes=%d gossip_bytes_per_node_per_s=%.0f (idle, over %v)\n", size, total/float64(len(nodes))/idle.Seconds(), idle)
	if stops == 0 {
		return nil
	}
	var suspect, dead, back []time.Duration
	for i := 0; i < stops; i++ {
		st, err := status(nodes[0].addr)
		if err != nil {
			return err
		}
		var leader uint64
		for _, g := range st.Groups {
			if g.Kind == "meta" {
				leader = g.Leader
			}
		}
		if leader == 0 {
			return errors.New("no meta leader")
		}
		ask := nodes[leader-1]
		victim := nodes[int(leader)%len(nodes)]
		ms, err := members(ask.addr)
		if err != nil {
			return err
		}
		var inc uint64
		for _, m := range ms.Members {
			if m.ID == victim.id {
				inc = m.Incarnation
			}
		}
		victim.run.Signal(syscall.SIGSTOP)
		t0 := time.Now()
		var s, d time.Duration
		for end := t0.Add(60 * time.Second); time.Now().Before(end) && d == 0; time.Sleep(50 * time.Millisecond) {
			ms, err := members(ask.addr)
			if err != nil {
				continue
			}
			for _, m := range ms.Members {
				if m.ID != victim.id {
					continue
				}
				if m.State != "alive" && s == 0 {
					s = time.Since(t0)
				}
				if m.Settled != nil && m.Settled.State == replica.LivenessDead && m.Settled.Incarnation >= inc {
					d = time.Since(t0)
				}
			}
		}
		victim.run.Signal(syscall.SIGCONT)
		if d == 0 {
			return fmt.Errorf("node %d not settled dead within 60s", victim.id)
		}
		t1 := time.Now()
		var b time.Duration
		for end := t1.Add(60 * time.Second); time.Now().Before(end) && b == 0; time.Sleep(50 * time.Millisecond) {
			ms, err := members(ask.addr)
			if err != nil {
				continue
			}
			for _, m := range ms.Members {
				if m.ID == victim.id && m.Settled != nil && m.Settled.State == replica.LivenessAlive && m.Settled.Incarnation > inc {
					b = time.Since(t1)
				}
			}
		}
		if b == 0 {
			return fmt.Errorf("node %d not settled alive again within 60s", victim.id)
		}
		suspect, dead, back = append(suspect, s), append(dead, d), append(back, b)
		fmt.Printf("nodes=%d stop=%d node=%d suspect=%v dead=%v alive_again=%v\n", size, i+1, victim.id, s.Round(10*time.Millisecond), d.Round(10*time.Millisecond), b.Round(10*time.Millisecond))
		if err := waitSettled(nodes, 60*time.Second); err != nil {
			return err
		}
		// Each stop starts from converged gossip: a node settled alive
		// again (its refutation reaches the leader at once) may not yet be
		// listed alive, at its new incarnation, by every other member's
		// memberlist, and stopped again then it is accused at once or at a
		// stale incarnation, which times the previous stop, not this one.
		time.Sleep(3 * time.Second)
	}
	fmt.Printf("nodes=%d stops=%d median: suspect=%v dead=%v alive_again=%v\n", size, stops, median(suspect).Round(10*time.Millisecond), median(dead).Round(10*time.Millisecond), median(back).Round(10*time.Millisecond))
	return nil
}
