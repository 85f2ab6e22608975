package main

// -heal: the time from mark-dead to every group back at its goal for a
// given amount of session data, the re-replication rate against a raw
// copy of the same bytes between two local processes, and the write p99
// of a session whose group is not changed, during the re-replication and
// without it.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

// heal runs the measure on 4 nodes in zones a, b, c, c: node 4 is killed
// and marked dead, and the groups it held are re-replicated on node 3.
func heal(bin string, mb, clients int) error {
	dir, err := os.MkdirTemp("", "tally-heal-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	procs, err := startCluster(bin, dir, 4, func(i int) string { return []string{"a", "b", "c", "c"}[i-1] }, "")
	defer stopAll(procs)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	st, err := status(procs[0].addr)
	if err != nil {
		return err
	}
	// The probe session lives in a group node 4 does not hold: nothing
	// changes in it when node 4 dies.
	quiet := map[uint64]bool{}
	for _, g := range st.Placement.Groups {
		if g.Group != 1 && !slices.ContainsFunc(g.Voters, func(v cluster.NodeRef) bool { return v.ID == 4 }) {
			quiet[g.Group] = true
		}
	}
	probe := ""
	for i := 0; probe == "" && i < 10000; i++ {
		if s := fmt.Sprintf("probe%d", i); quiet[groupOf(s)] {
			probe = s
		}
	}
	if probe == "" {
		return fmt.Errorf("every data group has a voter on node 4: no quiet group to probe")
	}

	// The data: 16 KiB promises over 64 sessions (none the probe's).
	text := strings.Repeat("x", 16<<10-64)
	n := mb << 20 / (16 << 10)
	start := time.Now()
	err = writeAll(n, clients, func(i, c int) error {
		body := fmt.Sprintf(`{"promise":"%s %d","to":"bob","until":"2h"}`, text, i)
		return post(hc, procs[(i+c)%3].addr, fmt.Sprintf("s%d", i%64), fmt.Sprintf("w%d", i), body)
	})
	if err != nil {
		return err
	}
	fmt.Printf("heal: %d writes of 16 KiB (%d MiB) in %v\n", n, mb, time.Since(start).Round(time.Millisecond))
	if err := settle(procs[0].addr, 60*time.Second); err != nil {
		return err
	}

	// The probe's p99 without a re-replication, for as long as the heal
	// will take (at least 10 s).
	p99 := func(d time.Duration, until func() bool) (time.Duration, int, error) {
		var lat []time.Duration
		end := time.Now().Add(d)
		for i := 0; time.Now().Before(end) || (until != nil && !until()); i++ {
			t0 := time.Now()
			if err := post(hc, procs[0].addr, probe, fmt.Sprintf("p%d-%d", time.Now().UnixNano(), i), `{"promise":"probe","to":"bob","until":"2h"}`); err != nil {
				return 0, 0, err
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat[len(lat)*99/100], len(lat), nil
	}
	cpu0, busy0, wall0 := cpuOf(procs[:3]), machineBusy(), time.Now()
	before, nb, err := p99(10*time.Second, nil)
	if err != nil {
		return err
	}
	cpuBefore, busyBefore := cores(cpuOf(procs[:3])-cpu0, wall0), busyCores(busy0)
	sent0 := metricSum(procs[:3], "tally_cluster_snapshot_sent_bytes_total")
	ledger := filepath.Join(procs[2].data, "ledger")
	held0 := du(ledger)

	// Kill node 4, mark it dead, and probe until every group is back.
	procs[3].cmd.Process.Kill()
	procs[3].cmd.Wait()
	mark := exec.Command(bin, "cluster", "mark-dead", "4", "--node", procs[0].addr)
	mark.Env = append(os.Environ(), "TALLY_JOIN_SECRET="+joinSecret)
	if out, err := mark.CombinedOutput(); err != nil {
		return fmt.Errorf("mark-dead 4: %v: %s", err, out)
	}
	marked := time.Now()
	cpu1, busy1 := cpuOf(procs[:3]), machineBusy()
	var healed atomic.Value
	go func() {
		for time.Since(marked) < 10*time.Minute {
			if settledWithout(procs[0].addr, 4) {
				healed.Store(time.Since(marked))
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	during, nd, err := p99(0, func() bool { return healed.Load() != nil })
	if err != nil {
		return err
	}
	took, _ := healed.Load().(time.Duration)
	cpuDuring, busyDuring := cores(cpuOf(procs[:3])-cpu1, marked), busyCores(busy1)
	if st, err := status(procs[0].addr); err == nil {
		for _, d := range st.Placement.Decisions {
			if d.Made >= marked.UnixNano() {
				fmt.Printf("heal: decision %d group %d %s node %d: %s at +%v, %v (%s) %s\n", d.ID, d.Group, d.Op, d.Node, d.State,
					time.Duration(d.Made-marked.UnixNano()).Round(time.Millisecond), time.Duration(d.Ended-d.Made).Round(time.Millisecond), d.Reason, d.Error)
			}
		}
	}
	snap := metricSum(procs[:3], "tally_cluster_snapshot_sent_bytes_total") - sent0
	// What node 3 took on: its ledger's growth (the sessions of the
	// groups it now holds), whether by snapshot or by the log.
	moved := du(ledger) - held0
	raw, err := rawCopy(moved)
	if err != nil {
		return err
	}
	rate := float64(moved) / took.Seconds() / 1e6
	fmt.Printf("heal: mark-dead → every group at its goal: %v; node 3's ledger grew %.1f MB (%.1f MB of it in snapshots, the rest by the log): %.1f MB/s; raw copy of as many bytes between two processes: %.1f MB/s (%.3fx)\n",
		took.Round(time.Millisecond), float64(moved)/1e6, float64(snap)/1e6, rate, raw, rate/raw)
	fmt.Printf("heal: write p99 of a session whose group is not changed: %v without (%d writes), %v during the re-replication (%d writes): %.2fx\n",
		before.Round(time.Microsecond), nb, during.Round(time.Microsecond), nd, during.Seconds()/before.Seconds())
	fmt.Printf("heal: CPU, in cores of %d: the three live servers %.2f without, %.2f during; the whole machine busy %.2f without, %.2f during\n",
		runtime.NumCPU(), cpuBefore, cpuDuring, busyBefore, busyDuring)
	return nil
}

// cores is CPU time spent since from, in cores.
func cores(cpu time.Duration, from time.Time) float64 {
	return cpu.Seconds() / time.Since(from).Seconds()
}

// busyTicks is the machine's busy and total CPU time, in clock ticks,
// from /proc/stat (zero where there is none).
type busyTicks struct {
	busy, total uint64
	at          time.Time
}

func machineBusy() busyTicks {
	t := busyTicks{at: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return t
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseUint(f, 10, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busyCores is how many of the machine's cores were busy since from.
func busyCores(from busyTicks) float64 {
	now := machineBusy()
	if now.total == from.total {
		return 0
	}
	return float64(now.busy-from.busy) / float64(now.total-from.total) * float64(runtime.NumCPU())
}

func groupOf(session string) uint64 {
	return replica.GroupOf(cluster.DefaultGroups, "acme", session)
}

func status(addr string) (cluster.Status, error) {
	res, err := http.Get("http://" + addr + cluster.StatusPath)
	if err != nil {
		return cluster.Status{}, err
	}
	defer res.Body.Close()
	var st cluster.Status
	return st, json.NewDecoder(res.Body).Decode(&st)
}

// settledWithout reports whether every data group has 3 voters, none of
// them id, with nothing in flight.
func settledWithout(addr string, id uint64) bool {
	st, err := status(addr)
	if err != nil || len(st.Placement.Groups) == 0 {
		return false
	}
	for _, g := range st.Placement.Groups {
		if g.Group == 1 {
			continue
		}
		if len(g.Voters) != 3 || len(g.Learners) != 0 || g.InFlight != nil || slices.ContainsFunc(g.Voters, func(v cluster.NodeRef) bool { return v.ID == id }) {
			return false
		}
	}
	return true
}

// metricSum is a counter summed over the nodes' /metrics.
func metricSum(procs []*proc, name string) int64 {
	var total int64
	for _, p := range procs {
		res, err := http.Get("http://" + p.addr + "/metrics")
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
				v, _ := strconv.ParseFloat(f[1], 64)
				total += int64(v)
			}
		}
		res.Body.Close()
	}
	return total
}

// rawCopy is the rate (MB/s) of n bytes copied from one process to
// another over 127.0.0.1: this process receives and writes them to a file
// it syncs; a child (this binary, -raw-send) reads them from a file and
// sends them.
func rawCopy(n int64) (float64, error) {
	src, err := os.CreateTemp("", "tally-raw-src-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(src.Name())
	chunk := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(chunk)) {
		if _, err := src.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
			return 0, err
		}
	}
	src.Sync()
	src.Close()
	dst, err := os.CreateTemp("", "tally-raw-dst-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(dst.Name())
	defer dst.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	send := exec.Command(self, "-raw-send", ln.Addr().String(), "-raw-file", src.Name())
	if err := send.Start(); err != nil {
		return 0, err
	}
	conn, err := ln.Accept()
	if err != nil {
		return 0, err
	}
	got, err := io.Copy(dst, conn)
	conn.Close()
	if err == nil {
		err = dst.Sync()
	}
	took := time.Since(start)
	send.Wait()
	if err != nil || got != n {
		return 0, fmt.Errorf("raw copy: %d of %d bytes: %v", got, n, err)
	}
	return float64(n) / took.Seconds() / 1e6, nil
}

// rawSend is the child of rawCopy: the file's bytes to addr.
func rawSend(addr, file string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = io.Copy(c, f)
	return err
}
