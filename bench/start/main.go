// Command start measures what a user waits for on every call of tally: the
// process start of `tally version` against a hello-world Go binary built
// with the same Go, one durable append on an empty ledger and on a ledger
// of 10,000 promises, and the reads of those 10,000 promises. Every command
// runs as a real process, the commands interleaved run by run, so the
// machine's load falls on all of them alike; each figure is a median over
// -runs and is printed beside its baseline and target.
//
//	go run ./bench/start                 # builds hello-world, tally and tally-server
//	go run ./bench/start -runs 50 -tally /tmp/tally   # tally-server beside it
//
// Besides wall time it prints the CPU time (user + system) of each command,
// which another process's load disturbs less than wall time, the peak
// resident memory, and, once per command, the package initialisation time
// that GODEBUG=inittrace=1 reports.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const helloSource = `package main

import "fmt"

func main() { fmt.Println("hello, world") }
`

func main() {
	runs := flag.Int("runs", 20, "runs of each command")
	bin := flag.String("tally", "", "a built tally binary (default: build ./cmd/tally)")
	n := flag.Int("n", 10000, "promises in the read ledger")
	before := flag.String("before", "", "another tally binary (an older commit's) to time beside, command for command, in the same run")
	flag.Parse()
	if err := run(*runs, *bin, *n, *before); err != nil {
		fmt.Fprintln(os.Stderr, "start:", err)
		os.Exit(1)
	}
}

// sample is one run of one command.
type sample struct {
	wall, cpu time.Duration
	faults    int64 // minor page faults
}

type command struct {
	name string
	argv []string
	env  []string
	out  []sample
	peak string // MiB, measured once
}

func run(runs int, bin string, n int, before string) error {
	tmp, err := os.MkdirTemp("", "tally-start-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	hello := filepath.Join(tmp, "hello")
	if err := buildHello(tmp, hello); err != nil {
		return fmt.Errorf("build hello-world: %w", err)
	}
	if bin == "" {
		// Both binaries, side by side, as `go install ./cmd/...` leaves them.
		bin = filepath.Join(tmp, "tally")
		if err := goCmd("", "build", "-o", tmp, "./cmd/tally", "./cmd/tally-server"); err != nil {
			return fmt.Errorf("build tally: %w", err)
		}
	}
	server := filepath.Join(filepath.Dir(bin), "tally-server")
	gen := filepath.Join(tmp, "gen")
	if err := goCmd("", "build", "-o", gen, "./bench/gen"); err != nil {
		return fmt.Errorf("build gen: %w", err)
	}

	// An empty ledger, and one of n promises (declarations only, none
	// overdue: `ls` lists them all).
	empty := filepath.Join(tmp, "empty")
	big := filepath.Join(tmp, "big")
	const now = "2026-10-01T00:00:00Z"
	for _, d := range []string{empty, big} {
		if err := runQuiet(nil, bin, "--dir", d, "init"); err != nil {
			return fmt.Errorf("init %s: %w", d, err)
		}
	}
	lines, err := exec.Command(gen, "pinki", "-n", strconv.Itoa(n), "-declarations-only", "-now", now, "-overdue", "0").Output()
	if err != nil {
		return fmt.Errorf("gen: %w", err)
	}
	imp := exec.Command(bin, "--dir", big, "import", "-")
	imp.Stdin = bytes.NewReader(lines)
	if out, err := imp.CombinedOutput(); err != nil {
		return fmt.Errorf("import: %v: %s", err, out)
	}
	// Open both once so that a checkpoint is written, as it would be after
	// the first command of a working day.
	for _, d := range []string{empty, big} {
		if err := runQuiet(nil, bin, "--dir", d, "ls", "--now", now); err != nil {
			return fmt.Errorf("ls %s: %w", d, err)
		}
	}

	actor := []string{"TALLY_ACTOR=team-01/agent-001"}
	promise := func(dir string) []string {
		return []string{bin, "--dir", dir, "promise", "hand back a reviewed schema", "--to", "team-02/author-002", "--until", "3d"}
	}
	cmds := []*command{
		{name: "hello-world", argv: []string{hello}},
		{name: "tally version", argv: []string{bin, "version"}},
		// The whole CLI in one binary, as tally was before the split.
		{name: "tally-server version", argv: []string{server, "version"}},
		{name: "tally promise (empty ledger)", argv: promise(empty), env: actor},
		{name: fmt.Sprintf("tally promise (%d promises)", n), argv: promise(big), env: actor},
		{name: fmt.Sprintf("tally ls --json (%d)", n), argv: []string{bin, "--dir", big, "ls", "--json", "--now", now}},
		{name: fmt.Sprintf("tally ls (%d)", n), argv: []string{bin, "--dir", big, "ls", "--now", now}},
	}
	if _, err := os.Stat(server); err != nil {
		cmds = slices.Delete(cmds, 2, 3) // a tally from before the split: no tally-server
	}
	main := len(cmds)
	if before != "" {
		for _, c := range cmds[1:main] {
			if strings.HasPrefix(c.name, "tally-server") {
				continue
			}
			argv := append([]string{before}, c.argv[1:]...)
			cmds = append(cmds, &command{name: "before: " + c.name, argv: argv, env: c.env})
		}
	}
	inits := map[string]string{}
	for _, c := range cmds[:3] {
		if strings.HasPrefix(c.name, "tally promise") {
			continue
		}
		s, err := initTrace(c)
		if err != nil {
			return err
		}
		inits[c.name] = s
	}
	for _, c := range cmds {
		c.peak = peakRSS(c)
	}
	// Two warm-up rounds, then the measured ones, interleaved.
	for r := -2; r < runs; r++ {
		for _, c := range cmds {
			s, err := measure(c)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if r >= 0 {
				c.out = append(c.out, s)
			}
		}
	}

	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("%d runs each, interleaved; load average %s", runs, load)
	fmt.Printf("%-34s %10s %10s %10s %10s\n", "command", "wall ms", "cpu ms", "faults", "peak MiB")
	for _, c := range cmds {
		fmt.Printf("%-34s %10.2f %10.2f %10d %10s\n", c.name, ms(median(c.out, wallOf)), ms(median(c.out, cpuOf)), median(c.out, faultsOf), c.peak)
	}
	for _, name := range []string{"hello-world", "tally version", "tally-server version"} {
		fmt.Printf("inittrace %-22s %s\n", name, inits[name])
	}
	rest := cmds[main:]
	hw, ver := cmds[0], cmds[1]
	whole := (*command)(nil)
	if strings.HasPrefix(cmds[2].name, "tally-server") {
		whole = cmds[2]
		cmds = append(cmds[:2:2], cmds[3:main]...)
	} else {
		cmds = cmds[:main]
	}
	fmt.Println()
	ratio := func(what string, a, b *command, of func(sample) time.Duration, target string) {
		fmt.Printf("%-58s %7.2f  (%s)\n", what, float64(median(a.out, of))/float64(median(b.out, of)), target)
	}
	ratio("start: tally version / hello-world, wall", ver, hw, wallOf, "target <= 1.5")
	ratio("start: tally version / hello-world, cpu", ver, hw, cpuOf, "target <= 1.5")
	ratio("start: tally version / hello-world, page faults", ver, hw, faultsOf, "robust under load")
	if whole != nil {
		ratio("start: tally-server version / hello-world, wall", whole, hw, wallOf, "one binary")
		ratio("start: tally-server version / hello-world, page faults", whole, hw, faultsOf, "one binary")
	}
	ratio("append: tally promise (empty) / tally version, wall", cmds[2], ver, wallOf, "target <= 1.2")
	fmt.Printf("%-58s %+7.2f  (target <= +5 ms)\n", fmt.Sprintf("open: tally promise (%d) - tally version, wall ms", n),
		ms(median(cmds[3].out, wallOf)-median(ver.out, wallOf)))
	fmt.Printf("%-58s %7.2f  (target <= 40 ms)\n", fmt.Sprintf("read: tally ls --json (%d), wall ms", n), ms(median(cmds[4].out, wallOf)))
	fmt.Printf("%-58s %7.2f  (target <= 40 ms)\n", fmt.Sprintf("read: tally ls (%d), wall ms", n), ms(median(cmds[5].out, wallOf)))
	for i, b := range rest {
		now := cmds[1+i]
		fmt.Printf("%-58s %7.2f  (wall; cpu %.2f, faults %.2f)\n", "now / before: "+now.name, float64(median(now.out, wallOf))/float64(median(b.out, wallOf)),
			float64(median(now.out, cpuOf))/float64(median(b.out, cpuOf)), float64(median(now.out, faultsOf))/float64(median(b.out, faultsOf)))
	}
	return nil
}

func buildHello(tmp, out string) error {
	dir := filepath.Join(tmp, "hello-src")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(helloSource), 0o644); err != nil {
		return err
	}
	return goCmd(dir, "build", "-o", out, ".")
}

func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func runQuiet(env []string, argv ...string) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func measure(c *command) (sample, error) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = append(os.Environ(), c.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Output to a file, as a script's redirection would: not a pipe this
	// process must drain while timing.
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return sample{}, err
	}
	defer null.Close()
	cmd.Stdout = null
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return sample{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	wall := time.Since(start)
	var faults int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		faults = ru.Minflt
	}
	return sample{wall: wall, cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), faults: faults}, nil
}

// peakRSS is c's peak resident memory in MiB, as GNU time reports it, or
// "-" without /usr/bin/time. Not from this process's own wait: Go starts a
// child with vfork, so the kernel counts this process's memory as the
// child's peak until it execs.
func peakRSS(c *command) string {
	if _, err := os.Stat("/usr/bin/time"); err != nil {
		return "-"
	}
	cmd := exec.Command("/usr/bin/time", append([]string{"-f", "%M"}, c.argv...)...)
	cmd.Env = append(os.Environ(), c.env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if cmd.Run() != nil {
		return "-"
	}
	f := strings.Fields(stderr.String())
	if len(f) == 0 {
		return "-"
	}
	kib, err := strconv.ParseFloat(f[len(f)-1], 64)
	if err != nil {
		return "-"
	}
	return strconv.FormatFloat(kib/1024, 'f', 1, 64)
}

// initTrace runs c once with GODEBUG=inittrace=1 and sums what it reports.
func initTrace(c *command) (string, error) {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Env = append(os.Environ(), append(c.env, "GODEBUG=inittrace=1")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v", c.name, err)
	}
	var pkgs, allocs int
	var clock float64
	var bytesN int64
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init tally/store @1.2 ms, 0.73 ms clock, 59760 bytes, 861 allocs
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[0] != "init" {
			continue
		}
		pkgs++
		v, _ := strconv.ParseFloat(f[4], 64)
		clock += v
		b, _ := strconv.ParseInt(f[7], 10, 64)
		bytesN += b
		a, _ := strconv.Atoi(f[9])
		allocs += a
	}
	return fmt.Sprintf("%d packages, %.2f ms, %d bytes, %d allocs", pkgs, clock, bytesN, allocs), nil
}

func wallOf(s sample) time.Duration   { return s.wall }
func faultsOf(s sample) time.Duration { return time.Duration(s.faults) }
func cpuOf(s sample) time.Duration    { return s.cpu }

func median(ss []sample, of func(sample) time.Duration) time.Duration {
	v := make([]time.Duration, len(ss))
	for i, s := range ss {
		v[i] = of(s)
	}
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
