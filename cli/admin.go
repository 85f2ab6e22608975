package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

func newInit(g *global) *cobra.Command {
	return &cobra.Command{
		Use:     "init",
		Short:   "Create a ledger: .tally/ in the working directory, or --dir",
		Example: "  tally init\n  tally init --dir /var/lib/tally",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir := g.dir
			if dir == "" {
				dir = g.io.Getenv("TALLY_DIR")
			}
			if dir == "" {
				dir = store.DirName
			}
			dir = g.abs(dir)
			if err := store.Init(dir); err != nil {
				return err
			}
			if g.json {
				return writeJSONDoc(g.io.Out, member("dir", jsonString(dir)), member("format", []byte(strconv.Itoa(store.FormatVersion))))
			}
			fmt.Fprintf(g.io.Out, "tally ledger at %s (log format v%d)\n", dir, store.FormatVersion)
			return nil
		},
	}
}

func newVersion(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print tally's version and the log format version",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if g.json {
				return writeJSONDoc(g.io.Out, member("version", jsonString(Version)), member("log_format", []byte(strconv.Itoa(store.FormatVersion))))
			}
			fmt.Fprintln(g.io.Out, versionLine())
			return nil
		},
	}
}

func newImport(g *global) *cobra.Command {
	return &cobra.Command{
		Use:     "import FILE",
		Short:   "Append another ledger's lines (pinki JSONL), keeping their ts and ids; all or nothing",
		Example: "  tally import .pinki/ledger.jsonl\n  cat ledger.jsonl | tally import -",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = readAll(g.io.In)
			} else {
				data, err = os.ReadFile(g.abs(args[0]))
			}
			if err != nil {
				return fmt.Errorf("import: %w", err)
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			actor, err := g.optionalActor(c.Context())
			if err != nil {
				return err
			}
			call, err := g.call(actor, "", time.Time{})
			if err != nil {
				return err
			}
			res, err := svc.Import(c.Context(), call, data)
			if err != nil {
				return prefixed("import "+args[0], err)
			}
			return g.printImport(res.Report)
		},
	}
}

// prefixed says what was refused before a refusal's message (a server's
// keeps its status and code); a failure to open the ledger is its own.
func prefixed(what string, err error) error {
	var ref *rest.Refusal
	if errors.As(err, &ref) {
		return rest.NewRefusal(ref.Status, ref.Code, what+": "+ref.Message)
	}
	// A refused line is a rule's refusal by the time the Service answers
	// (ledgerservice.ImportRefusal), so the CLI needs no ledger error.
	if _, ok := refuse.As(err); ok {
		return fmt.Errorf("%s: %w", what, err)
	}
	return err
}

// printImport prints what an import appended.
func (g *global) printImport(rep service.ImportReport) error {
	if g.json {
		_, err := g.io.Out.Write(service.ImportDoc(rep, false))
		return err
	}
	for _, w := range rep.Warnings {
		fmt.Fprintln(g.io.Err, "warning: "+w)
	}
	fmt.Fprintf(g.io.Out, "imported %d record(s) as lines %d–%d\n", rep.Appended, rep.FirstSeq, rep.LastSeq)
	return nil
}

func readAll(r interface{ Read([]byte) (int, error) }) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

func newExport(g *global) *cobra.Command {
	var o readOptions
	var format string
	c := &cobra.Command{
		Use:   "export [--format jsonl|json|pinki] [--now TIME]",
		Short: "Write the ledger out: the verified log (jsonl), states (json), or pinki's own lines (pinki)",
		Example: `  tally export --format pinki > ledger.jsonl
  tally export --format json --now 2026-09-02T10:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if format != "jsonl" && format != "json" && format != "pinki" {
				return usagef("format: must be jsonl, json or pinki")
			}
			now, err := parseNow(o.now, g.io.Now)
			if err != nil {
				return err
			}
			svc, call, err := g.serviceCall("", "", now)
			if err != nil {
				return err
			}
			res, err := svc.Export(c.Context(), call, format, g.io.Out, g.warnOnce)
			if err != nil {
				return err
			}
			if res.Torn != nil {
				fmt.Fprintf(g.io.Err, "warning: the log ends in an incomplete line (%d bytes), not exported\n", res.Torn.Size)
			}
			return nil
		},
	}
	c.Flags().StringVar(&format, "format", "jsonl", "jsonl (the log with envelopes), json (states at --now), pinki (records without envelopes)")
	o.bind(c)
	return c
}

func newVerify(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every line of each session's log and its hash chain; exit 0 only when all are whole",
		Long: "Without --session, verify checks every session of the ledger (over TALLY_URL, every session of the\n" +
			"token's tenant), one line each; with --session, that one session's log.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			svc, call, err := g.serviceCall("", "", time.Time{})
			if err != nil {
				return err
			}
			if g.session == "" {
				call.Tenant, call.Session = "", ""
				res, err := svc.VerifyAll(c.Context(), call)
				if err != nil {
					return err
				}
				return g.printVerifyAll(res.JSON)
			}
			res, err := svc.Verify(c.Context(), call)
			if err != nil {
				return err
			}
			return g.printVerify(res.JSON, res.Log)
		},
	}
}

// printVerify prints a verify report (the document `verify --json`
// prints, made here or by a server) of the log named log, and fails with
// exit 1 unless the log is whole.
func (g *global) printVerify(doc []byte, log string) error {
	var rep struct {
		Whole bool    `json:"whole"`
		Lines uint64  `json:"lines"`
		Error *string `json:"error"`
		Torn  *struct {
			Offset int64 `json:"offset"`
			Bytes  int64 `json:"bytes"`
		} `json:"torn"`
		Unknown []struct {
			Type      string `json:"type"`
			Count     int    `json:"count"`
			FirstLine uint64 `json:"first_line"`
			Reason    string `json:"reason"`
		} `json:"unknown"`
	}
	if err := json.Unmarshal(doc, &rep); err != nil {
		return fmt.Errorf("verify report: %w", err)
	}
	if g.json {
		return g.printVerifyDoc(doc, rep.Whole)
	}
	for _, u := range rep.Unknown {
		fmt.Fprintf(g.io.Out, "kept, not folded: %d record(s) of type %q (first at line %d: %s)\n", u.Count, u.Type, u.FirstLine, u.Reason)
	}
	switch {
	case rep.Error != nil:
		return errors.New(*rep.Error)
	case rep.Torn != nil:
		return fmt.Errorf("%s: line %d is incomplete (%d bytes at offset %d), left by an interrupted write; the next write cuts it", log, rep.Lines+1, rep.Torn.Bytes, rep.Torn.Offset)
	case !rep.Whole:
		return fmt.Errorf("%s: not whole", log)
	}
	fmt.Fprintf(g.io.Out, "ok: %d line(s), chain whole\n", rep.Lines)
	return nil
}

// printVerifyAll prints a report of every session (Service.VerifyAll's
// document): one line per session, the first bad line of each that is not
// whole, and exit 1 unless all are.
func (g *global) printVerifyAll(doc []byte) error {
	var all struct {
		Whole    bool `json:"whole"`
		Sessions []struct {
			Session string          `json:"session"`
			Log     string          `json:"log"`
			Report  json.RawMessage `json:"report"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(doc, &all); err != nil {
		return fmt.Errorf("verify report: %w", err)
	}
	if g.json {
		return g.printVerifyDoc(doc, all.Whole)
	}
	bad := 0
	for _, ss := range all.Sessions {
		var line bytes.Buffer
		one := *g
		one.io.Out = &line
		err := one.printVerify(ss.Report, ss.Log)
		for _, l := range strings.SplitAfter(line.String(), "\n") {
			if l != "" {
				fmt.Fprintf(g.io.Out, "%s: %s", ss.Session, l)
			}
		}
		if err != nil {
			bad++
			fmt.Fprintf(g.io.Out, "%s: %s\n", ss.Session, err)
		}
	}
	if len(all.Sessions) == 0 {
		fmt.Fprintln(g.io.Out, "ok: no sessions yet")
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d session(s) not whole", bad, len(all.Sessions))
	}
	return nil
}

// printVerifyDoc prints a verify document as it is, failing (exit 1)
// unless what it reports is whole.
func (g *global) printVerifyDoc(doc []byte, whole bool) error {
	if _, err := g.io.Out.Write(doc); err != nil {
		return err
	}
	if !whole {
		return silentExit{}
	}
	return nil
}

// silentExit fails with exit 1 when the output already said why.
type silentExit struct{}

func (silentExit) Error() string { return "" }
