// Command cluster measures tally's cluster on this machine: durable write
// throughput of a 3-node cluster against the single-node server with the
// same clients, in alternating rounds, and failover time (leader killed
// with SIGKILL → the first write acknowledged that was sent after the
// kill), and with -catchup the rate at which a node joining after that
// many events catches up. Every node runs as a real `tally serve` process
// on 127.0.0.1.
//
//	go build -o /tmp/ ./cmd/...   # tally, and tally-server, which runs its serve
//	go run ./bench/cluster -tally /tmp/tally -clients 64 -duration 10s -rounds 3 -failovers 10
//	go run ./bench/cluster -tally /tmp/tally -catchup 100000 -rounds 0 -failovers 0
//	go run ./bench/cluster -tally /tmp/new/tally -before /tmp/old/tally -rounds 3 -failovers 0
//	go run ./bench/cluster -tally /tmp/tally -rounds 1 -failovers 0 -cpuprofile /tmp/prof
//	go run ./bench/cluster -tally /tmp/tally -liveness -stops 10
//
// With -before, each round also runs the 3-node leg with that binary, right
// after this one's, so the two are compared under the same load. With
// -cpuprofile, every server writes a CPU profile of its whole run into
// that directory (single-R.pprof, nodeN-R.pprof), for go tool pprof.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tally/bench/internal/benchproc"
	"tally/cluster"
	"tally/cluster/replica"
)

func main() {
	bin := flag.String("tally", "tally", "the tally binary")
	clients := flag.Int("clients", 64, "concurrent clients")
	duration := flag.Duration("duration", 10*time.Second, "length of one throughput leg")
	rounds := flag.Int("rounds", 3, "throughput rounds (each: single node, then 3 nodes)")
	failovers := flag.Int("failovers", 10, "leader kills to time")
	catchup := flag.Int("catchup", 0, "events written before a fourth node joins, timed until it has applied them all (0: skip)")
	before := flag.String("before", "", "a second tally binary whose 3-node leg runs after each round's, interleaved")
	flag.StringVar(&profDir, "cpuprofile", "", "a directory for each server's CPU profile")
	live := flag.Bool("liveness", false, "measure the failure detector instead: a stopped node's time to suspicion and to settled dead (-stops times, 3 nodes), and idle gossip bytes per node per second at 3 and 9 nodes")
	stops := flag.Int("stops", 10, "with -liveness: nodes stopped with SIGSTOP to time")
	custody := flag.Int64("custody", 0, "measure an artifact of this many bytes beside the raft log instead: published through a follower of 3 nodes until full custody vs through one node, and the raft stores' growth per artifact byte, -rounds times")
	scrub := flag.Int64("scrub", 0, "measure the scrubber instead: one server over a content store of this many bytes, its scrub rate and the write p99 with scrubbing off, at the default rate and at a fast one, interleaved -rounds times (-clients writers, -duration a leg)")
	flag.Parse()
	if *scrub > 0 {
		benchproc.Must(scrubBench(*bin, *scrub, *clients, *duration, *rounds))
		return
	}
	if *custody > 0 {
		benchproc.Must(custodyBench(*bin, *custody, *rounds))
		return
	}
	if *live {
		err := livenessBench(*bin, []int{3}, *stops, 20*time.Second)
		if err == nil {
			err = livenessBench(*bin, []int{9}, 0, 20*time.Second)
		}
		benchproc.Must(err)
		return
	}
	if *catchup > 0 {
		benchproc.Must(catchUp(*bin, *clients, *catchup))
	}
	benchproc.Must(run(*bin, *before, *clients, *duration, *rounds, *failovers))
}

// profDir is -cpuprofile: where servers write their CPU profiles, or "".
var profDir string

type proc struct {
	id               uint64
	args             []string
	prof             string // the CPU profile's file name in profDir
	addr, raft, data string
	stderr           io.Writer // where its log goes (nil: nowhere)
	run              *benchproc.Process
}

func (p *proc) start(bin string) error {
	if i := slices.Index(p.args, "--gossip-addr"); i >= 0 && !knows(bin, "--gossip-addr") {
		// An older binary, from before the failure detector: no gossip.
		p.args = slices.Delete(slices.Clone(p.args), i, i+2)
	}
	cmd := exec.Command(bin, p.args...)
	cmd.Stderr = p.stderr
	if profDir != "" && p.prof != "" {
		// tally-server itself: tally would start the profile's timer and
		// then exec it, whose SIGPROF can come before its runtime handles it.
		cmd = exec.Command(filepath.Join(filepath.Dir(bin), "tally-server"), p.args...)
		cmd.Env = append(os.Environ(), "TALLY_CPUPROFILE="+filepath.Join(profDir, p.prof))
	}
	run, err := benchproc.Start(cmd)
	if err != nil {
		return err
	}
	p.run = run
	return nil
}

// cpuOf is the CPU time the processes have used (user and system).
func cpuOf(ps ...*proc) time.Duration {
	var pids []int
	for _, p := range ps {
		pids = append(pids, p.run.Pid())
	}
	return benchproc.CPU(pids...)
}

// selfCPU is this process's CPU time: the load generator's.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func (p *proc) kill() {
	if p.run != nil {
		p.run.Kill()
	}
}

func (p *proc) stop() {
	if p.run != nil {
		p.run.Stop()
	}
}

const secret = "bench-join-secret-0123456789"

func clusterNode(dir string, id uint64, extra ...string) *proc {
	p := &proc{id: id, addr: benchproc.FreePort(), raft: benchproc.FreePort(), data: filepath.Join(dir, fmt.Sprintf("n%d", id))}
	// Its own gossip address: the default (the raft port + 1) may be a port
	// another node here was given.
	p.args = append([]string{"serve", "--cluster", "--insecure-dev", "--node-id", fmt.Sprint(id), "--raft-addr", p.raft,
		"--addr", p.addr, "--data", p.data, "--join-secret", secret, "--gossip-addr", benchproc.FreePort()}, extra...)
	return p
}

// startCluster starts three nodes; their CPU profiles (with -cpuprofile)
// are named nodeN-tag.pprof.
func startCluster(bin, dir, tag string) ([]*proc, error) {
	n1 := clusterNode(dir, 1, "--bootstrap")
	n1.prof = "node1-" + tag + ".pprof"
	if err := n1.start(bin); err != nil {
		return nil, err
	}
	nodes := []*proc{n1}
	for id := uint64(2); id <= 3; id++ {
		n := clusterNode(dir, id, "--join", n1.addr)
		n.prof = fmt.Sprintf("node%d-%s.pprof", id, tag)
		if err := n.start(bin); err != nil {
			stopAll(nodes)
			return nil, err
		}
		nodes = append(nodes, n)
	}
	return nodes, waitSettled(nodes, 30*time.Second)
}

func stopAll(ps []*proc) {
	for _, p := range ps {
		p.stop()
	}
}

var client = &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func status(addr string) (cluster.Status, error) {
	return benchproc.GetJSON[cluster.Status](client, "http://"+addr+cluster.StatusPath)
}

// waitSettled waits until every live node sees a leader and the voters
// placement wants in every group (every member, up to the replication
// factor), and has applied all it has committed.
func waitSettled(nodes []*proc, d time.Duration) error {
	why := "no status answered"
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		ok := true
		for _, n := range nodes {
			st, err := status(n.addr)
			if err != nil {
				ok, why = false, fmt.Sprintf("node %d: %v", n.id, err)
				break
			}
			goal, elsewhere := map[uint64]int{}, map[uint64]bool{}
			for _, g := range st.Placement.Groups {
				goal[g.Group] = g.Goal
				held := false
				for _, v := range append(slices.Clone(g.Voters), g.Learners...) {
					held = held || v.ID == n.id
				}
				elsewhere[g.Group] = g.Recorded && !held
			}
			for _, g := range st.Groups {
				if elsewhere[g.Group] {
					continue // placed on other nodes: this one hears no leader of it
				}
				want, placed := goal[g.Group]
				if !placed {
					want = len(nodes)
				}
				if g.Leader == 0 || len(g.Voters) != want || g.Applied != g.Commit {
					ok = false
					why = fmt.Sprintf("node %d: group %d: leader %d, voters %v (%d wanted), applied %d of %d", n.id, g.Group, g.Leader, g.Voters, want, g.Applied, g.Commit)
				}
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("the cluster did not settle: %s", why)
}

var seq atomic.Uint64

// declare writes one promise in acme/main; it reports whether it was
// acknowledged (201).
func declare(addr string) bool {
	body := fmt.Sprintf(`{"promise":"bench %d","to":"bob","until":"2h"}`, seq.Add(1))
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/tenants/acme/sessions/main/promises", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Tally-Actor", "alice")
	res, err := client.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode == http.StatusCreated
}

// load runs clients writing through addrs (client i through addrs[i%n])
// for d and returns the acknowledged writes per second.
func load(addrs []string, clients int, d time.Duration) float64 {
	var acked atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				if declare(addrs[i%len(addrs)]) {
					acked.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(acked.Load()) / time.Since(start).Seconds()
}

func run(bin, before string, clients int, d time.Duration, rounds, failovers int) error {
	dir, err := os.MkdirTemp("", "tally-bench-cluster-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if rounds > 0 {
		fmt.Printf("throughput: %d clients, %v a leg, one session (acme/main), every write durable\n", clients, d)
		fmt.Println("round  binary  single node /s  3 nodes /s  ratio   CPU µs a write: single (server+clients)  3 nodes (servers+clients)  cluster/single CPU")
	}
	perWrite := func(cpu time.Duration, rate float64) float64 {
		return float64(cpu.Microseconds()) / (rate * d.Seconds())
	}
	for r := 1; r <= rounds; r++ {
		single := &proc{addr: benchproc.FreePort(), prof: fmt.Sprintf("single-%d.pprof", r)}
		sdir := filepath.Join(dir, fmt.Sprintf("single%d", r))
		single.args = []string{"serve", "--insecure-dev", "--dir", sdir, "--addr", single.addr, "--watch-every", "0"}
		if err := single.start(bin); err != nil {
			return err
		}
		cpu0, self0 := cpuOf(single), selfCPU()
		one := load([]string{single.addr}, clients, d)
		oneServer, oneClients := cpuOf(single)-cpu0, selfCPU()-self0
		single.stop()
		legs := []struct{ name, bin string }{{"new", bin}}
		if before != "" {
			legs = append(legs, struct{ name, bin string }{"before", before})
		}
		for _, leg := range legs {
			nodes, err := startCluster(leg.bin, filepath.Join(dir, fmt.Sprintf("cluster%d-%s", r, leg.name)), fmt.Sprintf("%d-%s", r, leg.name))
			if err != nil {
				return err
			}
			var addrs []string
			for _, n := range nodes {
				addrs = append(addrs, n.addr)
			}
			cpu0, self0 = cpuOf(nodes...), selfCPU()
			three := load(addrs, clients, d)
			threeServers, threeClients := cpuOf(nodes...)-cpu0, selfCPU()-self0
			stopAll(nodes)
			fmt.Printf("%5d  %-6s  %13.0f  %10.0f  %5.2f   %6.0f+%-6.0f  %6.0f+%-6.0f  %5.2f\n", r, leg.name, one, three, three/one,
				perWrite(oneServer, one), perWrite(oneClients, one), perWrite(threeServers, three), perWrite(threeClients, three),
				perWrite(threeServers, three)/perWrite(oneServer, one))
		}
	}
	if failovers == 0 {
		return nil
	}
	nodes, err := startCluster(bin, filepath.Join(dir, "failover"), "failover")
	if err != nil {
		return err
	}
	defer stopAll(nodes)
	group := replica.GroupOf(cluster.DefaultGroups, "acme", "main")
	var times []time.Duration
	for i := 0; i < failovers; i++ {
		st, err := status(nodes[0].addr)
		if err != nil {
			return err
		}
		var leader *proc
		for _, g := range st.Groups {
			if g.Group == group && g.Leader != 0 {
				leader = nodes[g.Leader-1]
			}
		}
		if leader == nil {
			return fmt.Errorf("failover %d: group %d has no leader", i, group)
		}
		var others []string
		for _, n := range nodes {
			if n != leader {
				others = append(others, n.addr)
			}
		}
		// Writers through the other nodes; time the first write sent
		// after the kill that is acknowledged.
		killed := time.Now()
		leader.kill()
		first := make(chan time.Duration, 1)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		var wg sync.WaitGroup
		for c := range 8 {
			wg.Go(func() {
				for ctx.Err() == nil {
					if declare(others[c%len(others)]) {
						select {
						case first <- time.Since(killed):
						default:
						}
						cancel()
					}
				}
			})
		}
		wg.Wait()
		cancel()
		select {
		case t := <-first:
			times = append(times, t)
			fmt.Printf("failover %2d: node %d killed; first acknowledged write after %v\n", i+1, leader.id, t.Round(time.Millisecond))
		default:
			return fmt.Errorf("failover %d: no write acknowledged in 30s", i+1)
		}
		leader.args = slices.DeleteFunc(slices.Clone(leader.args), func(a string) bool { return a == "--bootstrap" })
		if j := slices.Index(leader.args, "--join"); j >= 0 {
			leader.args = slices.Delete(leader.args, j, j+2)
		}
		if err := leader.start(bin); err != nil {
			return err
		}
		if err := waitSettled(nodes, 30*time.Second); err != nil {
			return fmt.Errorf("after failover %d: %w", i+1, err)
		}
	}
	slices.Sort(times)
	fmt.Printf("failover median of %d: %v (min %v, max %v)\n", len(times), times[len(times)/2].Round(time.Millisecond),
		times[0].Round(time.Millisecond), times[len(times)-1].Round(time.Millisecond))
	return nil
}

// catchUp writes events to a 3-node cluster, then joins a fourth node and
// times it until it has applied every group's commit; it reports the rate
// and the size of what it installed (its sessions' logs) per million events.
func catchUp(bin string, clients, events int) error {
	dir, err := os.MkdirTemp("", "tally-bench-catchup-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	nodes, err := startCluster(bin, dir, "catchup")
	if err != nil {
		return err
	}
	defer func() { stopAll(nodes) }()
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr)
	}
	var left atomic.Int64
	left.Store(int64(events))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				for !declare(addrs[i%len(addrs)]) {
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	fmt.Printf("catch-up: %d events written in %v\n", events, time.Since(start).Round(time.Millisecond))
	n4 := clusterNode(dir, 4, "--join", nodes[0].addr)
	joined := time.Now()
	if err := n4.start(bin); err != nil {
		return err
	}
	nodes = append(nodes, n4)
	if err := waitSettled(nodes, 10*time.Minute); err != nil {
		return err
	}
	took := time.Since(joined)
	var size int64
	filepath.Walk(filepath.Join(n4.data, "ledger", "sessions"), func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "log.jsonl" {
			size += fi.Size()
		}
		return nil
	})
	fmt.Printf("catch-up: node 4 joined and applied all %d events in %v: %.0f events/s; installed logs %d bytes, %.0f MB per million events\n",
		events, took.Round(time.Millisecond), float64(events)/took.Seconds(), size, float64(size)/float64(events))
	return nil
}

// knows reports whether bin's serve takes flag (an older binary may not).
func knows(bin, flag string) bool {
	out, _ := exec.Command(bin, "serve", "--help").CombinedOutput()
	return strings.Contains(string(out), flag)
}
