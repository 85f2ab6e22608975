package cli

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"sort"
	"strconv"

	"github.com/spf13/cobra"

	"tally/ledger"
	"tally/promise"
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
			actor := g.actor()
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			rep, err := l.Import(c.Context(), bytes.Split(data, []byte{'\n'}), ledger.WriteOptions{Actor: actor})
			if err != nil {
				return fmt.Errorf("import %s: %w", args[0], err)
			}
			if g.json {
				return writeJSONDoc(g.io.Out, member("appended", []byte(strconv.Itoa(rep.Appended))), member("unknown", []byte(strconv.Itoa(rep.Unknown))),
					member("first_seq", []byte(strconv.FormatUint(rep.FirstSeq, 10))), member("last_seq", []byte(strconv.FormatUint(rep.LastSeq, 10))))
			}
			for _, w := range rep.Warnings {
				fmt.Fprintln(g.io.Err, "warning: "+w)
			}
			fmt.Fprintf(g.io.Out, "imported %d record(s) as lines %d–%d\n", rep.Appended, rep.FirstSeq, rep.LastSeq)
			return nil
		},
	}
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
			switch format {
			case "jsonl", "pinki":
				l, err := g.open()
				if err != nil {
					return err
				}
				defer l.Close()
				w := bufio.NewWriterSize(g.io.Out, 1<<16)
				_, torn, err := l.Lines(func(e store.Entry) error {
					if format == "jsonl" {
						w.Write(e.Line)
						return w.WriteByte('\n')
					}
					typ, _ := promise.PeekType(e.Line)
					if !promise.Known(typ) {
						return nil
					}
					w.Write(store.Body(e.Line))
					return w.WriteByte('\n')
				})
				if err != nil {
					return err
				}
				if torn != nil {
					fmt.Fprintf(g.io.Err, "warning: the log ends in an incomplete line (%d bytes), not exported\n", torn.Size)
				}
				return w.Flush()
			case "json":
				vs, now, err := g.views(o, promise.Filter{State: "all"})
				if err != nil {
					return err
				}
				return writeViewList(g.io.Out, "promises", vs, now)
			}
			return usagef("format: must be jsonl, json or pinki")
		},
	}
	c.Flags().StringVar(&format, "format", "jsonl", "jsonl (the log with envelopes), json (states at --now), pinki (records without envelopes)")
	o.bind(c)
	return c
}

func newVerify(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "verify",
		Short: "Check every line of the log and its hash chain; exit 0 only when the log is whole",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			l, err := g.openForVerify()
			if err != nil {
				return err
			}
			defer l.Close()
			rep := l.Verify()
			types := make([]string, 0, len(rep.Skipped))
			for t := range rep.Skipped {
				types = append(types, t)
			}
			sort.Strings(types)
			if g.json {
				unk := []byte{'['}
				for i, t := range types {
					if i > 0 {
						unk = append(unk, ',')
					}
					s := rep.Skipped[t]
					unk = fmt.Appendf(unk, `{"type":%s,"count":%d,"first_line":%d,"reason":%s}`, jsonString(t), s.Count, s.FirstLine, jsonString(s.Reason))
				}
				unk = append(unk, ']')
				errv := []byte("null")
				if rep.Err != nil {
					errv = jsonString(rep.Err.Error())
				}
				torn := []byte("null")
				if rep.Torn != nil {
					torn = fmt.Appendf(nil, `{"offset":%d,"bytes":%d}`, rep.Torn.Offset, rep.Torn.Size)
				}
				if err := writeJSONDoc(g.io.Out, member("whole", []byte(strconv.FormatBool(rep.Whole()))), member("lines", []byte(strconv.FormatUint(rep.Lines, 10))),
					member("error", errv), member("torn", torn), member("unknown", unk)); err != nil {
					return err
				}
			} else {
				for _, t := range types {
					s := rep.Skipped[t]
					fmt.Fprintf(g.io.Out, "kept, not folded: %d record(s) of type %q (first at line %d: %s)\n", s.Count, t, s.FirstLine, s.Reason)
				}
				if rep.Whole() {
					fmt.Fprintf(g.io.Out, "ok: %d line(s), chain whole\n", rep.Lines)
				}
			}
			switch {
			case rep.Err != nil:
				if g.json {
					return silentExit{}
				}
				return rep.Err
			case rep.Torn != nil:
				if g.json {
					return silentExit{}
				}
				return fmt.Errorf("%s: line %d is incomplete (%d bytes at offset %d), left by an interrupted write; the next write cuts it", l.Log().Path(), rep.Lines+1, rep.Torn.Size, rep.Torn.Offset)
			}
			return nil
		},
	}
}

// silentExit fails with exit 1 when the output already said why.
type silentExit struct{}

func (silentExit) Error() string { return "" }

// openForVerify opens the session's log without folding it, so verify can
// report damage that would stop a normal open.
func (g *global) openForVerify() (*ledger.Bare, error) {
	dir, err := g.sessionDir()
	if err != nil {
		return nil, err
	}
	return ledger.OpenBare(dir)
}
