package cli

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/claim"
	"tally/ledger"
	"tally/rule"
	"tally/server"
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
		return rule.Invalidf(field, "required")
	}
	return nil
}

// claimWrite runs one claim command as the acting identity and prints the
// records it appended and the claim's state afterwards.
func (g *global) claimWrite(c *cobra.Command, cmd claim.Command, claimID, requestID string, human func(w io.Writer, v *claim.View, res []ledger.Result)) error {
	if rc, err := g.remote(); err != nil || rc != nil {
		if err != nil {
			return err
		}
		return g.claimWriteRemote(c, rc, cmd, requestID, human)
	}
	actor, err := g.requireActor("")
	if err != nil {
		return err
	}
	l, err := g.open()
	if err != nil {
		return err
	}
	defer l.Close()
	_, err = g.write(c, l, ledger.Command{Claim: cmd}, actor, requestID, nil, claimAnswer(claimID, cmd, human))
	return err
}

// claimAnswer prints what the write of cmd appended and the claim
// afterwards, as printClaimWrite does.
func claimAnswer(claimID string, cmd claim.Command, human func(w io.Writer, v *claim.View, res []ledger.Result)) answerFunc {
	return func(g *global, st *ledger.State, res []ledger.Result) error {
		v, _ := st.Claims.Claim(claimID, g.io.Now().UTC())
		return g.printClaimView(&v, cmd, res, human)
	}
}

// printClaimWrite prints what the write of cmd appended and the claim
// afterwards: the server's document with --json (server.ClaimWriteDoc),
// else as printClaimHuman does.
func (g *global) printClaimWrite(l *ledger.Ledger, claimID string, cmd claim.Command, res []ledger.Result, human func(w io.Writer, v *claim.View, res []ledger.Result)) error {
	now := g.io.Now().UTC()
	var v claim.View
	v, _ = l.Claim(claimID, now)
	return g.printClaimView(&v, cmd, res, human)
}

func (g *global) printClaimView(v *claim.View, cmd claim.Command, res []ledger.Result, human func(w io.Writer, v *claim.View, res []ledger.Result)) error {
	notes := server.ClaimNotes(cmd, v)
	if g.json {
		_, err := g.io.Out.Write(server.ClaimWriteDoc(res, v, notes...))
		return err
	}
	g.printClaimHuman(v, res, notes, human)
	return nil
}

// printClaimHuman prints a claim write for people: the verb's own lines,
// the dependency failures it caused, and the claim's state; the write's
// notes go to stderr.
func (g *global) printClaimHuman(v *claim.View, res []ledger.Result, notes []string, human func(w io.Writer, v *claim.View, res []ledger.Result)) {
	for _, n := range notes {
		fmt.Fprintln(g.io.Err, "note: "+n)
	}
	if human != nil {
		human(g.io.Out, v, res)
	}
	for _, r := range res {
		if r.Type == claim.TypeDependency {
			if e, err := claim.Decode(r.Line); err == nil {
				fmt.Fprintf(g.io.Out, "%s: DependencyFailed (depends on %s)\n", e.Claim, e.On)
			}
		}
	}
	fmt.Fprintf(g.io.Out, "%s: %s\n", v.Claim, paint(g.color(), claimColor(v.State, v.Overdue), string(v.State)))
}

// claimView reads one claim's view, or refuses when there is none.
func (g *global) claimView(l *ledger.Ledger, id string, now time.Time) (claim.View, error) {
	var v claim.View
	var ok bool
	v, ok = l.Claim(id, now)
	if !ok {
		return v, rule.NotFoundf("claim", "no claim "+strconv.Quote(id))
	}
	return v, nil
}

// mintArtifactID returns a fresh artifact id: art_ and 8 hex digits.
func mintArtifactID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("cli: no randomness: " + err.Error())
	}
	return "art_" + hex.EncodeToString(b[:])
}
