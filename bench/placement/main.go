// Command placement measures what the replication factor buys: the same
// writes on a 3-node cluster and on a 5-node cluster, both with
// --replicas 3, nodes in 3 zones; for each, the bytes on disk per node
// (its data directory: raft store and replica ledger) and the servers'
// CPU (user + system, from /proc) per acknowledged write. Every node is a
// real `tally serve` process on 127.0.0.1.
//
//	go build -o /tmp/ ./cmd/...
//	go run ./bench/placement -tally /tmp/tally -writes 100000 -clients 32
//
// With -heal MB it measures healing instead (heal.go):
//
//	go run ./bench/placement -tally /tmp/tally -heal 1024 -clients 16
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"tally/bench/internal/benchproc"
	"tally/internal/dirbytes"
)

func main() {
	bin := flag.String("tally", "tally", "the tally binary")
	writes := flag.Int("writes", 20000, "acknowledged writes per cluster")
	clients := flag.Int("clients", 32, "concurrent clients")
	sessions := flag.Int("sessions", 64, "sessions the writes spread over")
	profDir := flag.String("cpuprofile", "", "write each node's CPU profile of the 5-node run to DIR/node-N.prof (go tool pprof -top DIR/*.prof)")
	healMB := flag.Int("heal", 0, "measure healing instead: MiB of session data on 4 nodes, one killed and marked dead")
	rawSendTo := flag.String("raw-send", "", "(internal) send -raw-file to this address: the raw copy's sender")
	rawFile := flag.String("raw-file", "", "(internal) the raw copy's file")
	flag.Parse()
	if *rawSendTo != "" {
		if err := rawSend(*rawSendTo, *rawFile); err != nil {
			fmt.Fprintln(os.Stderr, "raw send:", err)
			os.Exit(1)
		}
		return
	}
	if *healMB > 0 {
		benchproc.Must(heal(*bin, *healMB, *clients))
		return
	}
	res := map[int]result{}
	for _, n := range []int{3, 5} {
		prof := ""
		if n == 5 {
			prof = *profDir
		}
		r, err := measure(*bin, n, *writes, *clients, *sessions, prof)
		benchproc.Must(err)
		res[n] = r
		fmt.Printf("%d nodes, --replicas 3: %d writes in %v; bytes per node %v (mean %.1f MB); CPU %.1f µs per write\n",
			n, *writes, r.took.Round(time.Millisecond), r.bytes, r.meanBytes()/1e6, r.cpu.Seconds()*1e6/float64(*writes))
	}
	fmt.Printf("ratio 5 nodes / 3 nodes: bytes per node %.2fx, CPU per write %.2fx\n",
		res[5].meanBytes()/res[3].meanBytes(), res[5].cpu.Seconds()/res[3].cpu.Seconds())
}

type result struct {
	took  time.Duration
	bytes []int64
	cpu   time.Duration
}

func (r result) meanBytes() float64 {
	var sum int64
	for _, b := range r.bytes {
		sum += b
	}
	return float64(sum) / float64(len(r.bytes))
}

type proc struct {
	addr, data string
	cmd        *exec.Cmd
}

// measure runs a cluster of n nodes, writes, stops it and measures it.
func measure(bin string, n, writes, clients, sessions int, profDir string) (result, error) {
	dir, err := os.MkdirTemp("", "tally-placement-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	procs, err := startCluster(bin, dir, n, func(i int) string { return string(rune('a' + (i-1)%3)) }, profDir)
	defer stopAll(procs)
	if err != nil {
		return result{}, err
	}
	cpu0 := cpuOf(procs)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	start := time.Now()
	err = writeAll(writes, clients, func(i, c int) error {
		return write(hc, procs[(i+c)%n].addr, fmt.Sprintf("s%d", i%sessions), fmt.Sprintf("w%d", i))
	})
	took := time.Since(start)
	if err != nil {
		return result{}, err
	}
	// Let every replica apply what was acknowledged before measuring.
	time.Sleep(2 * time.Second)
	r := result{took: took, cpu: cpuOf(procs) - cpu0}
	for _, p := range procs {
		p.cmd.Process.Signal(syscall.SIGTERM)
		p.cmd.Wait()
	}
	for _, p := range procs {
		r.bytes = append(r.bytes, du(p.data))
	}
	return r, nil
}

// writeAll runs n writes over clients concurrent clients: write i by
// client c is fn(i, c). It stops at the first error, and returns it.
func writeAll(n, clients int, fn func(i, c int) error) error {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n) && failed.Load() == nil; i = next.Add(1) - 1 {
				if err := fn(int(i), c); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	err, _ := failed.Load().(error)
	return err
}

// startCluster starts n nodes under dir, node i in zone zone(i), the
// first bootstrapping with --replicas 3, each writing its CPU profile
// into profDir if given, and waits until the placement has settled.
func startCluster(bin, dir string, n int, zone func(int) string, profDir string) ([]*proc, error) {
	var procs []*proc
	for i := 1; i <= n; i++ {
		p := &proc{addr: benchproc.FreePort(), data: filepath.Join(dir, fmt.Sprint(i))}
		args := []string{"serve", "--cluster", "--insecure-dev", "--node-id", fmt.Sprint(i), "--raft-addr", benchproc.FreePort(), "--gossip-addr", benchproc.FreePort(), "--addr", p.addr,
			"--data", p.data, "--zone", zone(i), "--join-secret", joinSecret}
		if i == 1 {
			args = append(args, "--bootstrap", "--replicas", "3")
		} else {
			args = append(args, "--join", procs[0].addr)
		}
		p.cmd = exec.Command(bin, args...)
		if profDir != "" {
			p.cmd.Env = append(os.Environ(), "TALLY_CPUPROFILE="+filepath.Join(profDir, fmt.Sprintf("node-%d.prof", i)))
		}
		p.cmd.Stderr = io.Discard
		out, err := p.cmd.StdoutPipe()
		if err != nil {
			return procs, err
		}
		if err := p.cmd.Start(); err != nil {
			return procs, err
		}
		procs = append(procs, p)
		sc := bufio.NewScanner(out)
		for sc.Scan() && !strings.Contains(sc.Text(), "serving on") {
		}
		go io.Copy(io.Discard, out)
	}
	return procs, settle(procs[0].addr, 90*time.Second)
}

// stopAll kills what is left of the nodes.
func stopAll(procs []*proc) {
	for _, p := range procs {
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	}
}

const joinSecret = "bench-join-secret-0123456789"

// settle waits until every data group has 3 voters recorded and nothing
// in flight.
func settle(addr string, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		st, err := status(addr)
		if err != nil || len(st.Placement.Groups) == 0 {
			continue
		}
		ok := true
		for _, g := range st.Placement.Groups {
			if g.Group != 1 && (!g.Recorded || len(g.Voters) != 3 || len(g.Learners) != 0 || g.InFlight != nil) {
				ok = false
			}
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("the cluster at %s did not settle within %v", addr, d)
}

// write declares a promise, following the answer's leader_addr and
// retrying a 503 under the same idempotency key.
func write(hc *http.Client, addr, session, key string) error {
	return post(hc, addr, session, key, fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, key))
}

// post declares the promise body under key, as write does.
func post(hc *http.Client, addr, session, key, body string) error {
	for try := 0; try < 50; try++ {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/tenants/acme/sessions/"+session+"/promises", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Tally-Actor", "alice")
		req.Header.Set("Idempotency-Key", key)
		res, err := hc.Do(req)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		switch res.StatusCode {
		case http.StatusCreated, http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			var ref struct {
				LeaderAddr string `json:"leader_addr"`
			}
			if json.Unmarshal(b, &ref) == nil && ref.LeaderAddr != "" {
				addr = ref.LeaderAddr
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		default:
			return fmt.Errorf("write %s: %d %s", key, res.StatusCode, b)
		}
	}
	return fmt.Errorf("write %s: no answer after 50 tries", key)
}

// cpuOf is the processes' user and system CPU so far, with their
// children (tally runs tally-server).
func cpuOf(procs []*proc) time.Duration {
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.cmd.Process.Pid
	}
	return benchproc.CPU(pids...)
}

// du is the bytes of the files under dir.
func du(dir string) int64 { return dirbytes.Of(dir) }
