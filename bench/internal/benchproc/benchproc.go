// Package benchproc runs the `tally serve` processes the benchmarks
// measure, on 127.0.0.1: free ports, a process that is ready once it says
// it serves, the CPU time processes used (from /proc), and JSON reads of
// their HTTP API.
package benchproc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits of starting and stopping one process.
const (
	readyMax = 30 * time.Second // from start to "serving" on its stdout
	stopMax  = 5 * time.Second  // from SIGTERM to its exit, before SIGKILL
	tailMax  = 2048             // bytes of stderr kept to say why it did not start
)

// FreePort is a 127.0.0.1 address nothing listens on now.
func FreePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Process is one started server.
type Process struct {
	Cmd    *exec.Cmd
	exited chan struct{} // closed once Cmd has exited
}

// Start starts cmd and returns once its stdout says it is serving (at most
// readyMax). Unless cmd has a stderr of its own, the end of its stderr is
// kept to say why it did not start.
func Start(cmd *exec.Cmd) (*Process, error) {
	var stderr tail
	if cmd.Stderr == nil {
		cmd.Stderr = &stderr
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, exited: make(chan struct{})}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(sc.Text(), "serving") {
				said = true
				ready <- true
			}
		}
		if !said {
			ready <- false
		}
	}()
	go func() { cmd.Wait(); close(p.exited) }()
	select {
	case ok := <-ready:
		if ok {
			return p, nil
		}
		<-p.exited
		return nil, fmt.Errorf("%v exited before serving (%v): %s", cmd.Args, cmd.ProcessState, stderr.String())
	case <-time.After(readyMax):
		p.Kill()
		return nil, fmt.Errorf("%v did not serve in %v", cmd.Args, readyMax)
	}
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) { p.Cmd.Process.Signal(sig) }

// Kill kills the process and waits for its exit.
func (p *Process) Kill() {
	p.Cmd.Process.Kill()
	<-p.exited
}

// Stop asks the process to stop (SIGTERM) and waits for its exit; after
// stopMax it kills it.
func (p *Process) Stop() {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopMax):
		p.Kill()
	}
}

// CPU is the user and system CPU time the processes and their children
// have used, from /proc; a process it cannot read counts zero.
func CPU(pids ...int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		for _, id := range append([]int{pid}, children(pid)...) {
			total += cpuOf(id)
		}
	}
	return total
}

func cpuOf(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and stime
	// are the 14th and 15th of the whole line, in clock ticks (USER_HZ,
	// 100 a second on Linux).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100
}

// children are a process's child pids, and theirs.
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if c, err := strconv.Atoi(f); err == nil {
			out = append(out, c)
			out = append(out, children(c)...)
		}
	}
	return out
}

// GetJSON reads the JSON document at url.
func GetJSON[T any](c *http.Client, url string) (T, error) {
	var v T
	res, err := c.Get(url)
	if err != nil {
		return v, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return v, fmt.Errorf("GET %s: %s", url, res.Status)
	}
	return v, json.NewDecoder(res.Body).Decode(&v)
}

// tail keeps the last tailMax bytes written to it.
type tail struct {
	mu sync.Mutex
	b  []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}

// Must ends a bench whose measurement failed: err on stderr, exit 1.
func Must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
