package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"tally/api"
	"tally/claim"
	"tally/refuse"
	"tally/service"
)

// addClaimCommands adds the claims family's verbs: claim, receipt, progress,
// artifact, testament and check.
func addClaimCommands(root *cobra.Command, g *global) {
	root.AddCommand(newClaimCmd(g), newReceiptCmd(g), newProgressCmd(g), newArtifactCmd(g), newTestamentCmd(g), newCheckCmd(g))
}

// stdinArg is the argument that makes a verb read its whole command as one
// JSON document on stdin.
const stdinArg = "-"

// fromStdin reports whether args ask for the command on stdin and, if so,
// decodes it into doc: one JSON object whose members are the verb's fields
// (snake_case); an unknown member is refused by name. Members given in the
// document override flags.
func (g *global) fromStdin(args []string, doc any) (bool, error) {
	if len(args) != 1 || args[0] != stdinArg {
		return false, nil
	}
	b, err := io.ReadAll(io.LimitReader(g.io.In, 4<<20))
	if err != nil {
		return true, fmt.Errorf("read stdin: %w", err)
	}
	return true, api.Decode("stdin", b, doc)
}

// claimDoc fills a verb's document from stdin when its argument is "-",
// else takes the claim (or artifact, or check) it names from the argument.
func (g *global) claimDoc(args []string, doc any, id *string) error {
	if _, err := g.fromStdin(args, doc); err != nil {
		return err
	}
	if a := oneArg(args); a != "" {
		*id = a
	}
	return nil
}

// claimPair fills a verb's document from stdin when its argument is "-",
// else takes the claim and the second id (an artifact, a testament) from
// its two arguments; other arguments are a usage error saying takes.
func (g *global) claimPair(args []string, doc any, claim, second *string, takes string) error {
	stdin, err := g.fromStdin(args, doc)
	if err != nil || stdin {
		return err
	}
	if len(args) != 2 {
		return usagef("%s (or - for a JSON document on stdin)", takes)
	}
	*claim, *second = args[0], args[1]
	return nil
}

// oneArg returns the verb's single positional argument (unless the command
// came on stdin, where the document names it).
func oneArg(args []string) string {
	if len(args) == 1 && args[0] != stdinArg {
		return args[0]
	}
	return ""
}

// need refuses an empty required field, with the code the server gives
// the same document (invalid, exit 2).
func need(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return refuse.Invalidf(field, "required")
	}
	return nil
}

// claimHuman prints a claim verb's own lines for people, from the claim as
// the write left it and the records it appended.
type claimHuman func(w io.Writer, v *claim.View, recs []service.ClaimRecord)

// claimWriter is the Service and the Call a claim write runs with: as the
// acting identity (over TALLY_URL the token's), under requestID.
func (g *global) claimWriter(requestID string) (cliService, service.Call, error) {
	svc, actor, err := g.writer()
	if err != nil {
		return nil, service.Call{}, err
	}
	c, err := g.call(actor, requestID, time.Time{})
	return svc, c, err
}

// writer is the Service and the acting identity a claim or expectation
// write runs with.
func (g *global) writer() (cliService, string, error) {
	svc, err := g.service()
	if err != nil {
		return nil, "", err
	}
	actor, err := g.requireActor("")
	return svc, actor, err
}

// actorReader is the Service and the Call a claim or expectation read
// runs with: as the acting identity, if one is set, at now (zero: the
// service's clock).
func (g *global) actorReader(now time.Time) (cliService, service.Call, error) {
	return g.serviceCall(g.actor(), "", now)
}

// claimWrite runs one claim write through the Service and prints what it
// appended and the claim as it left it.
func (g *global) claimWrite(requestID string, run func(svc cliService, call service.Call) (service.ClaimWritten, error), human claimHuman) error {
	svc, call, err := g.claimWriter(requestID)
	if err != nil {
		return err
	}
	w, err := run(svc, call)
	if err != nil {
		return err
	}
	return g.printClaimWrites(human, w)
}

// WithRequestID is the request id a write's document carries beside its
// api document: request_id on stdin, --request-id as a flag. (Exported:
// the document decoder sets it through the embedding.)
type WithRequestID struct {
	RequestID string `json:"request_id,omitempty"`
}

// requestIDFlag binds --request-id to the request id.
func (w *WithRequestID) requestIDFlag(f *pflag.FlagSet) {
	f.StringVar(&w.RequestID, "request-id", "", "your id for this request")
}

// claimStep is the run of a claim write whose one argument names the
// claim (or whose whole document comes on stdin): it reads doc (the verb's
// document: d and its request id) and writes d through write.
func claimStep[D any](g *global, doc any, d *D, claimID, requestID *string,
	write func(cliService, context.Context, service.Call, D) (service.ClaimWritten, error), human claimHuman) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, args []string) error {
		if err := g.claimDoc(args, doc, claimID); err != nil {
			return err
		}
		return g.claimWrite(*requestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
			return write(svc, c.Context(), call, *d)
		}, human)
	}
}

// printClaimWrites prints the answers of one or more claim writes of one
// verb: with --json one answer's document as is, or several's records in
// order with the claim as the last left it; else for people.
func (g *global) printClaimWrites(human claimHuman, ws ...service.ClaimWritten) error {
	last := ws[len(ws)-1]
	if g.json && len(ws) == 1 {
		_, err := g.io.Out.Write(last.JSON)
		return err
	}
	var recs []service.ClaimRecord
	for _, w := range ws {
		recs = append(recs, w.Records...)
	}
	if g.json {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(last.JSON, &m); err != nil {
			return fmt.Errorf("claim write document: %w", err)
		}
		lines := []byte{'['}
		for i, r := range recs {
			if i > 0 {
				lines = append(lines, ',')
			}
			lines = append(lines, r.Line...)
		}
		return writeJSONDoc(g.io.Out, member("records", append(lines, ']')), member("claim", m["claim"]))
	}
	g.printClaimHuman(&last.Claim, recs, last.Notes, human)
	return nil
}

// printClaimHuman prints a claim write for people: the verb's own lines,
// the dependency failures it caused, and the claim's state; the write's
// notes go to stderr.
func (g *global) printClaimHuman(v *claim.View, recs []service.ClaimRecord, notes []string, human claimHuman) {
	for _, n := range notes {
		fmt.Fprintln(g.io.Err, "note: "+n)
	}
	if human != nil {
		human(g.io.Out, v, recs)
	}
	for _, r := range recs {
		if r.Type == claim.TypeDependency {
			if e, err := claim.Decode(r.Line); err == nil {
				fmt.Fprintf(g.io.Out, "%s: DependencyFailed (depends on %s)\n", e.Claim, e.On)
			}
		}
	}
	fmt.Fprintf(g.io.Out, "%s: %s\n", v.Claim, paint(g.color(), claimColor(v.State, v.Overdue), string(v.State)))
}

// mintArtifactID returns a fresh artifact id: art_ and 8 hex digits.
func mintArtifactID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("cli: no randomness: " + err.Error())
	}
	return "art_" + hex.EncodeToString(b[:])
}
