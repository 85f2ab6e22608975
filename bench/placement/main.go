// Command placement measures what the replication factor buys: the same
// writes on a 3-node cluster and on a 5-node cluster, both with
// --replicas 3, nodes in 3 zones; for each, the bytes on disk per node
// (its data directory: raft store and replica ledger) and the servers'
// CPU (user + system, from /proc) per acknowledged write. Every node is a
// real `tally serve` process on 127.0.0.1.
//
//	go build -o /tmp/ ./cmd/...
//	go run ./bench/placement -tally /tmp/tally -writes 100000 -clients 32
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"tally/bench/internal/benchproc"
	"tally/cluster"
)

func main() {
	bin := flag.String("tally", "tally", "the tally binary")
	writes := flag.Int("writes", 20000, "acknowledged writes per cluster")
	clients := flag.Int("clients", 32, "concurrent clients")
	sessions := flag.Int("sessions", 64, "sessions the writes spread over")
	flag.Parse()
	res := map[int]result{}
	for _, n := range []int{3, 5} {
		r, err := measure(*bin, n, *writes, *clients, *sessions)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
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
	run        *benchproc.Process
}

// measure runs a cluster of n nodes, writes, stops it and measures it.
func measure(bin string, n, writes, clients, sessions int) (result, error) {
	dir, err := os.MkdirTemp("", "tally-placement-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	var procs []*proc
	defer func() {
		for _, p := range procs {
			p.run.Kill()
		}
	}()
	for i := 1; i <= n; i++ {
		p := &proc{addr: benchproc.FreePort(), data: filepath.Join(dir, fmt.Sprint(i))}
		args := []string{"serve", "--cluster", "--insecure-dev", "--node-id", fmt.Sprint(i), "--raft-addr", benchproc.FreePort(), "--addr", p.addr,
			"--data", p.data, "--zone", string(rune('a' + (i-1)%3)), "--join-secret", "bench-join-secret-0123456789"}
		if i == 1 {
			args = append(args, "--bootstrap", "--replicas", "3")
		} else {
			args = append(args, "--join", procs[0].addr)
		}
		run, err := benchproc.Start(exec.Command(bin, args...))
		if err != nil {
			return result{}, err
		}
		p.run = run
		procs = append(procs, p)
	}
	if err := settle(procs[0].addr, 90*time.Second); err != nil {
		return result{}, err
	}
	cpu0 := cpuOf(procs)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(writes); i = next.Add(1) - 1 {
				if err := write(hc, procs[(int(i)+c)%n].addr, fmt.Sprintf("s%d", i%int64(sessions)), fmt.Sprintf("w%d", i)); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		return result{}, err
	}
	// Let every replica apply what was acknowledged before measuring.
	time.Sleep(2 * time.Second)
	r := result{took: took, cpu: cpuOf(procs) - cpu0}
	for _, p := range procs {
		p.run.Stop()
	}
	for _, p := range procs {
		r.bytes = append(r.bytes, du(p.data))
	}
	procs = nil
	return r, nil
}

// settle waits until every data group has 3 voters recorded and nothing
// in flight.
func settle(addr string, d time.Duration) error {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		st, err := benchproc.GetJSON[cluster.Status](http.DefaultClient, "http://"+addr+cluster.StatusPath)
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
	body := fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, key)
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

// cpuOf is the processes' user and system CPU so far.
func cpuOf(procs []*proc) time.Duration {
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.run.Pid())
	}
	return benchproc.CPU(pids...)
}

// du is the bytes of the files under dir.
func du(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
