// Package cli is tally's command line: each verb parses its flags into an
// options value, calls the ledger, and prints through Streams, so tests run
// it in process with buffers and the binary runs it with the terminal.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	restclient "tally/client"
	"tally/ledger"
	"tally/refuse"
	"tally/rest"
	"tally/store"
)

// Version is tally's release; the log format version comes from store.
const Version = "0.1.0"

// SchemaVersion is carried by every --json document.
const SchemaVersion = api.SchemaVersion

// ExitCode is what the process returns: 0 ok, 1 refused or failed, 2 usage.
type ExitCode int

const (
	ExitOK    ExitCode = 0
	ExitError ExitCode = 1
	ExitUsage ExitCode = 2
)

// Streams is everything a command reads from or writes to outside itself.
type Streams struct {
	In       io.Reader
	Out      io.Writer
	Err      io.Writer
	Getenv   func(string) string
	Cwd      string
	Now      func() time.Time
	Terminal bool // stdout is a terminal: colour allowed unless NO_COLOR
	// Server runs a command line with tally-server, for the verbs only it
	// holds (hosted.go); nil where no process may be replaced.
	Server func(args []string) error
}

// System returns the process's real streams.
func System() Streams {
	cwd, _ := os.Getwd()
	term := false
	if fi, err := os.Stdout.Stat(); err == nil {
		term = fi.Mode()&os.ModeCharDevice != 0
	}
	return Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr, Getenv: os.Getenv, Cwd: cwd, Now: time.Now, Terminal: term, Server: execServer}
}

// usageError marks an error as a usage error (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// global holds the flags every verb shares.
type global struct {
	io      Streams
	args    []string // the command line, without the program's name
	dir     string
	session string
	json    bool
	as      string
	// consistency is --consistency: a read through a cluster node at
	// "stale" is served from that node's replica as applied.
	consistency string

	// The Service the verbs call (service.go), made on first use.
	svc      cliService
	rest     *restclient.Client   // the client, with TALLY_URL
	sessions *cliSessions         // the sessions Local opened, without it
	whoami   *restclient.Identity // once asked
	warned   map[string]bool      // the warnings printed (warnOnce)
}

func (g *global) color() bool { return g.io.Terminal && g.io.Getenv("NO_COLOR") == "" }

// actor is the acting identity: --as, else TALLY_ACTOR.
func (g *global) actor() string {
	if g.as != "" {
		return g.as
	}
	return g.io.Getenv("TALLY_ACTOR")
}

// root finds the ledger directory: --dir, TALLY_DIR, or the nearest .tally.
func (g *global) root() (string, error) {
	if g.dir != "" {
		return g.dir, nil
	}
	if d := g.io.Getenv("TALLY_DIR"); d != "" {
		return d, nil
	}
	root, err := store.Find(g.io.Cwd)
	if errors.Is(err, store.ErrNoLedger) {
		// An agent in a worktree of its own finds no ledger above it: it
		// should reach the fleet's, not start a second one.
		return "", fmt.Errorf("no ledger in %s or above it: to use your fleet's ledger set TALLY_DIR to its directory (or pass --dir DIR), or TALLY_URL (with TALLY_TOKEN) to its server; to start a new ledger here, run `tally init`", g.io.Cwd)
	}
	return root, err
}

// ledgerRoot is the absolute path of the ledger directory in use, which
// must already be a ledger.
func (g *global) ledgerRoot() (string, error) {
	root, err := g.root()
	if err != nil {
		return "", err
	}
	root = g.abs(root)
	if !store.IsLedger(root) {
		return "", fmt.Errorf("%s is not a tally ledger: run `tally init` there first", root)
	}
	return root, nil
}

// sessionDir resolves the session directory of the ledger in use.
func (g *global) sessionDir() (string, error) {
	root, err := g.ledgerRoot()
	if err != nil {
		return "", err
	}
	tenant, session, err := g.target()
	if err != nil {
		return "", err
	}
	dir, err := store.SessionDir(root, tenant, session)
	if err != nil {
		return "", usageError{err}
	}
	return dir, nil
}

// open opens the session's ledger, warning once about records it skips.
func (g *global) open() (*ledger.Ledger, error) {
	dir, err := g.sessionDir()
	if err != nil {
		return nil, err
	}
	return g.openDir(dir)
}

// ledgerConfig is the ledger configuration with the ledger directory's
// settings (its tally.json) applied.
func (g *global) ledgerConfig() (ledger.Config, error) {
	root, err := g.ledgerRoot()
	if err != nil {
		return ledger.Config{}, err
	}
	st, err := store.ReadSettings(root)
	if err != nil {
		return ledger.Config{}, err
	}
	return ledger.DefaultConfig().WithSettings(st)
}

func (g *global) abs(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(g.io.Cwd, p)
}

// Main runs tally with args and returns its exit code; the hosted verbs
// run through io.Server.
func Main(args []string, io Streams) ExitCode { return MainWith(args, io, nil) }

// MainWith runs tally with args and the hosted verbs hosted adds (nil:
// stand-ins that run them through io.Server) and returns its exit code.
func MainWith(args []string, io Streams, hosted Hosted) ExitCode {
	g := &global{io: io, args: args}
	root := newRootFor(g, hosted, args)
	root.SetArgs(args)
	root.SetIn(g.io.In)
	root.SetOut(io.Out)
	root.SetErr(io.Err)
	err := root.ExecuteContext(context.Background())
	if g.sessions != nil {
		if cerr := g.sessions.close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		return ExitOK
	}
	return g.fail(err)
}

// fail prints err (its error document in --json mode) and maps it to an
// exit code: 2 for a usage error or a refusal of the request itself (HTTP
// 400, 413, 415), 1 otherwise. The document and the message are the ones a
// server answers with (rest.Refuse), so a verb prints the same locally
// and over TALLY_URL.
func (g *global) fail(err error) ExitCode {
	if _, ok := err.(silentExit); ok {
		return ExitError
	}
	ref := refusal(err)
	if g.json {
		g.io.Err.Write(ref.Document)
	} else {
		fmt.Fprintln(g.io.Err, "tally: "+ref.Message)
	}
	if ref.Usage() {
		return ExitUsage
	}
	return ExitError
}

// refusal maps err to its refusal: a server's as it answered, the CLI's
// usage errors as code "usage" (400), the rest as rest.Refuse does.
func refusal(err error) *rest.Refusal {
	var ref *rest.Refusal
	if errors.As(err, &ref) {
		return ref
	}
	var ue usageError
	if _, isRule := refuse.As(err); !isRule && (errors.As(err, &ue) || isFlagError(err)) {
		return rest.NewRefusal(http.StatusBadRequest, "usage", err.Error())
	}
	return rest.Refuse(err)
}

// isFlagError recognises cobra's and pflag's parse errors, which carry no type.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument", "unknown command", "accepts ", "requires at least", "if any flags in the group", "bad flag syntax", "none of the others can be"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

func newRoot(g *global, hosted Hosted) *cobra.Command {
	return addVerbs(newRootBare(g), g, hosted)
}

// newRootBare is the root command with its persistent flags and no verbs.
func newRootBare(g *global) *cobra.Command {
	root := &cobra.Command{
		Use:   "tally",
		Short: "A durable ledger of obligations between agents",
		Long: "tally records what is owed, by whom, to whom and until when, in an append-only hash-chained log,\nand computes every state by folding it.\n\n" +
			"With TALLY_URL set (and TALLY_TOKEN), the promise verbs (promise, amend, resolve, assess, show, ls, owed,\n" +
			"graph), export, import (admin role), verify, the claim, receipt, progress, testament, artifact and check\n" +
			"verbs and the expectation verbs talk to `tally serve` and print what they print locally, acting as the\n" +
			"token's identity; the verbs that make or run a ledger directory or a server (init, demo, serve, token,\n" +
			"watch) refuse (exit 2).",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       Version,
	}
	root.SetVersionTemplate(versionLine() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	// With TALLY_URL set, verbs talk to a server (see urlverbs.go); the
	// others refuse rather than quietly use a local ledger.
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return g.checkRemote(c) }
	pf := root.PersistentFlags()
	pf.StringVar(&g.dir, "dir", "", "ledger directory (default: $TALLY_DIR, else the nearest .tally/ above the working directory)")
	pf.StringVar(&g.session, "session", "", "session as TENANT/SESSION (default: default/default)")
	pf.BoolVar(&g.json, "json", false, "print JSON (with schema_version) instead of text")
	pf.StringVar(&g.as, "as", "", "acting identity (default: $TALLY_ACTOR)")
	pf.StringVar(&g.consistency, "consistency", "", "reads through a cluster node (TALLY_URL): linearizable (the default: confirmed with the group's leader) or stale (this node's replica as applied, which may miss recent writes); a local ledger's reads are always current")
	return root
}

// newRootFor is newRoot for a call with args. tally (hosted nil) called
// with a soloVerb first builds only that verb under the root: a
// call builds one cobra command, not a hundred (the whole tree was about
// a seventh of `tally version`'s time). Any other call, tally-server's
// included, gets the whole tree, for help, suggestions and completion.
func newRootFor(g *global, hosted Hosted, args []string) *cobra.Command {
	if hosted == nil && len(args) > 0 {
		if verb := soloVerb(args[0]); verb != nil {
			root := newRootBare(g)
			root.AddCommand(verb(g))
			guardGroups(root)
			return root
		}
	}
	return newRoot(g, hosted)
}

// soloVerb is the constructor of a verb newRootFor may build alone, by
// name (nil for any other): each a command of its own with no verbs under
// it (TestSoloVerbsAreTheTree holds each to the command the whole tree
// has). A switch, not a map: nothing to build at every start.
func soloVerb(name string) func(*global) *cobra.Command {
	switch name {
	case "init":
		return newInit
	case "promise":
		return newPromise
	case "amend":
		return newAmend
	case "resolve":
		return newResolve
	case "assess":
		return newAssess
	case "show":
		return newShow
	case "ls":
		return newLs
	case "owed":
		return newOwed
	case "graph":
		return newGraph
	case "export":
		return newExport
	case "import":
		return newImport
	case "verify":
		return newVerify
	case "version":
		return newVersion
	}
	return nil
}

// addVerbs adds every verb to root.
func addVerbs(root *cobra.Command, g *global, hosted Hosted) *cobra.Command {
	root.AddCommand(
		newInit(g), newPromise(g), newAmend(g), newResolve(g), newAssess(g),
		newShow(g), newLs(g), newOwed(g), newGraph(g),
		newExport(g), newImport(g), newVerify(g), newVersion(g), newDemo(g),
		newToken(g),
	)
	// Each family adds its verbs from its own file.
	addClaimCommands(root, g)
	addExpectCommands(root, g)
	addA2ACommands(root, g)
	addPrimeCommands(root, g)
	addReadyCommands(root, g)
	if hosted != nil {
		hosted(root, Env{g})
	} else {
		addStandIns(root, g)
	}
	root.InitDefaultCompletionCmd() // cobra adds it at Execute, after the guard otherwise
	guardGroups(root)
	return root
}

// guardGroups makes every command group (a command with verbs under it and
// no action of its own) refuse a word that names none of its verbs, so a
// typo in a script is a usage error rather than help and exit 0. A group
// given no word still prints its help.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = unknownVerb
	c.SuggestionsMinimumDistance = 2
	c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
}

// unknownVerb refuses any argument to a command group, naming the closest verbs.
func unknownVerb(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %s?", strings.Join(quoteAll(s), " or "))
	} else {
		msg += fmt.Sprintf("; run `%s --help` for its verbs", c.CommandPath())
	}
	return usagef("%s", msg)
}

func quoteAll(s []string) []string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = strconv.Quote(v)
	}
	return q
}

func versionLine() string {
	return fmt.Sprintf("tally %s (log format v%d)", Version, store.FormatVersion)
}
