package cli

// The verbs that run a server or act on a cluster node (serve, mcp,
// cluster, backup, restore) link the HTTP server, raft, pebble, MCP and
// Prometheus, whose package initialisation and pages every process would
// otherwise pay at start, `tally version` included. They live in package
// servecli and in the binary tally-server; the binary tally holds stand-ins
// for them that run tally-server with the same arguments (Streams.Server).
// tally-server is the whole CLI: every verb, these included.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	restclient "tally/client"
	"tally/service"
)

// ServerBinary is the name of the binary that holds the hosted verbs,
// installed beside tally by `go install ./cmd/...`.
const ServerBinary = "tally-server"

// hostedShorts are the hosted verbs and their one-line help, which both
// the stand-ins and servecli's commands show.
func hostedShorts() [][2]string {
	return [][2]string{
		{"serve", "Serve the ledger over HTTP: JSON API, event stream, metrics"},
		{"mcp", "Serve the ledger's verbs as MCP tools over stdio, for an agent host to launch"},
		{"cluster", "A cluster node's view of the cluster, and its operator's changes: status, members, groups, placements, transfer-leader, add-node, remove-node, place"},
		{"backup", "Write a verifiable backup of every session (the sequence each holds, its log, the artifacts it names): of a ledger directory, or of a cluster through any node"},
		{"restore", "Restore a backup into a new ledger directory (--dir), or as the first node of a new cluster (--data); print the sequence each session was restored to"},
	}
}

// HostedShort is the one-line help of the hosted verb name.
func HostedShort(name string) string {
	for _, v := range hostedShorts() {
		if v[0] == name {
			return v[1]
		}
	}
	panic("cli: no hosted verb " + name)
}

// HostedVerbs are the names of the verbs the tally binary runs through
// tally-server.
func HostedVerbs() []string {
	var names []string
	for _, v := range hostedShorts() {
		names = append(names, v[0])
	}
	return names
}

// Hosted adds the hosted verbs to the root command; servecli.Add is the one.
type Hosted func(root *cobra.Command, env Env)

// addStandIns adds, for each hosted verb, a command that hands the whole
// command line to tally-server: its flags, its help and its errors are
// tally-server's.
func addStandIns(root *cobra.Command, g *global) {
	for _, v := range hostedShorts() {
		c := &cobra.Command{
			Use:                v[0],
			Short:              v[1],
			DisableFlagParsing: true,
			// tally-server checks TALLY_URL against the verb itself.
			PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
			RunE:              func(*cobra.Command, []string) error { return g.runServer() },
		}
		// `tally help serve` is tally-server's help too.
		c.SetHelpFunc(func(*cobra.Command, []string) {
			if err := g.runServer(); err != nil {
				fmt.Fprintln(g.io.Err, "tally: "+err.Error())
			}
		})
		root.AddCommand(c)
	}
}

// runServer runs the process's command line with tally-server.
func (g *global) runServer() error {
	if g.io.Server == nil {
		return fmt.Errorf("%s: this process cannot run %s", g.args[0], ServerBinary)
	}
	return g.io.Server(g.args)
}

// execServer replaces the process with tally-server run with args: the one
// beside this executable (as `go install ./cmd/...` leaves them), else the
// one on PATH.
func execServer(args []string) error {
	path := ""
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), ServerBinary)
		if fi, err := os.Stat(beside); err == nil && !fi.IsDir() {
			path = beside
		}
	}
	if path == "" {
		found, err := exec.LookPath(ServerBinary)
		if err != nil {
			return fmt.Errorf("%s: needs %s, which is neither beside this tally nor on PATH: install both with `go install ./cmd/...`", args[0], ServerBinary)
		}
		path = found
	}
	// A running CPU profile's timer survives exec and its signal would kill
	// tally-server before it installs a handler; tally-server starts its own.
	pprof.StopCPUProfile()
	err := syscall.Exec(path, append([]string{path}, args...), os.Environ())
	return fmt.Errorf("%s: run %s: %w", args[0], path, err)
}

// Run is a binary's main: tally's with hosted nil, tally-server's with
// servecli.Add. It returns the exit code.
func Run(hosted Hosted) ExitCode {
	if os.Getenv("GOGC") == "" {
		// Most invocations fold a ledger and exit within milliseconds; the
		// heap they build is live until then, so collecting it early is
		// wasted work. `tally serve` is long-lived and sets its own.
		debug.SetGCPercent(400)
	}
	io := System()
	if path := os.Getenv("TALLY_CPUPROFILE"); path != "" {
		// For measuring tally itself: a CPU profile of this one command.
		if f, err := os.Create(path); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer f.Close()
				defer pprof.StopCPUProfile()
			}
		}
	}
	return MainWith(os.Args[1:], io, hosted)
}

// Env is the CLI's shared state (the streams and the global flags) as the
// hosted verbs, outside this package, see it.
type Env struct{ g *global }

// IO is the process's streams.
func (e Env) IO() Streams { return e.g.io }

// JSON is --json.
func (e Env) JSON() bool { return e.g.json }

// Dir is --dir.
func (e Env) Dir() string { return e.g.dir }

// SetDir points the verbs at the ledger directory dir, as --dir would.
func (e Env) SetDir(dir string) { e.g.dir = dir }

// Abs is p made absolute against the working directory.
func (e Env) Abs(p string) string { return e.g.abs(p) }

// Root is the ledger directory named (--dir, TALLY_DIR, or the nearest
// .tally), which need not be a ledger yet.
func (e Env) Root() (string, error) { return e.g.root() }

// LedgerRoot is the absolute path of the ledger directory in use, which
// must be a ledger.
func (e Env) LedgerRoot() (string, error) { return e.g.ledgerRoot() }

// RemoteURL is TALLY_URL without a trailing slash; "" means local.
func (e Env) RemoteURL() string { return e.g.remoteURL() }

// Actor is the acting identity: --as, else TALLY_ACTOR.
func (e Env) Actor() string { return e.g.actor() }

// Target is the session --session names (default default/default).
func (e Env) Target() (tenant, session string, err error) { return e.g.target() }

// Service is the process's Service: the ledger directory's, or with
// TALLY_URL the server's.
func (e Env) Service() (service.Service, error) { return e.g.service() }

// Identity asks the server (TALLY_URL) who the CLI acts as.
func (e Env) Identity(ctx context.Context) (restclient.Identity, error) {
	return e.g.identity(ctx)
}

// Usagef is a usage error (exit 2).
func Usagef(format string, a ...any) error { return usagef(format, a...) }

// UsageError marks err as a usage error (exit 2).
func UsageError(err error) error { return usageError{err} }

// UnknownVerb refuses any argument to a command group, naming the closest
// verbs; it is a group's cobra.PositionalArgs.
func UnknownVerb(c *cobra.Command, args []string) error { return unknownVerb(c, args) }
