package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"tally/artifact"
	"tally/claim"
	"tally/ledger"
	"tally/rule"
	"tally/store"
)

// CodeDamaged is the --json error code of a stored copy whose bytes no
// longer match its digest.
const CodeDamaged rule.Code = "damaged"

// objects opens the content store of the ledger in use: <ledger>/objects,
// shared by every session of the ledger.
func (g *global) objects() (*artifact.Store, error) {
	root, err := g.ledgerRoot()
	if err != nil {
		return nil, err
	}
	return artifact.OpenStore(store.ObjectsDir(root))
}

// storeError turns a content store error about one artifact into a refusal.
func storeError(what string, err error) error {
	var de *artifact.DamagedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &de):
		return rule.New(CodeDamaged, "artifact", fmt.Sprintf("the stored copy of %s is damaged (content %s, read as %s); nothing was written", what, de.Want, de.Got))
	case errors.Is(err, artifact.ErrNotFound):
		return rule.NotFoundf("artifact", "the bytes of "+what+" are not in the content store")
	}
	return err
}

// verifyArtifact checks that the bytes of a recorded artifact are present
// and intact; the claim core cannot do I/O, so every verb that pins a target
// calls this before appending. It returns the artifact's view.
func (g *global) verifyArtifact(ctx context.Context, objs *artifact.Store, a claim.ArtifactView) error {
	d, err := artifact.ParseContentDigest(a.Content)
	if err != nil {
		return err
	}
	return storeError("artifact "+a.Artifact, objs.Verify(ctx, d))
}

// lookupArtifact returns a recorded artifact of a claim.
func lookupArtifact(l *ledger.Ledger, claimID, id string) (claim.ArtifactView, bool) {
	var a claim.ArtifactView
	var ok bool
	l.Read(func(st *ledger.State, _ store.Position) { a, ok = st.Claims.Artifact(claimID, id) })
	return a, ok
}

func newArtifactCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "artifact",
		Short: "Content-addressed artifacts: bytes in <ledger>/objects, verified on every read, recorded in a claim",
	}
	c.AddCommand(newArtifactPut(g), newArtifactGet(g), newArtifactLs(g), newArtifactVerify(g))
	return c
}

// putDoc is `tally artifact put -`'s document and the put flags.
type putDoc struct {
	File       string `json:"file"`
	Claim      string `json:"claim"`
	Artifact   string `json:"artifact,omitempty"`
	Role       string `json:"role,omitempty"`
	Slot       string `json:"slot,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Schema     string `json:"schema,omitempty"`
	Name       string `json:"name,omitempty"`
	Generation uint64 `json:"generation,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
}

// defaultRole is output for a slot, diagnostic under a receipt generation,
// else result (an evaluator's or the claimant's evidence).
func (d *putDoc) defaultRole() {
	switch {
	case d.Role != "":
	case d.Slot != "":
		d.Role = string(claim.RoleOutput)
	case d.Generation > 0:
		d.Role = string(claim.RoleDiagnostic)
	default:
		d.Role = string(claim.RoleResult)
	}
}

func newArtifactPut(g *global) *cobra.Command {
	var d putDoc
	c := &cobra.Command{
		Use:   "put FILE --claim C [--slot S --generation N] [--kind K --schema X --role R --id ID] | put -",
		Short: "Store a file's bytes in the content store and record the artifact in a claim",
		Long: "Store a file's bytes (hashed while written, fsynced, renamed into place) and record the artifact.\n" +
			"Role: output with --slot (the holder, under --generation), diagnostic with --generation alone, else\n" +
			"result (an evaluator's or the claimant's evidence). The id defaults to a fresh art_xxxxxxxx.",
		Example: `  tally artifact put fix.patch --claim C17 --slot change --generation 1 --kind patch --schema text/x-diff --id patch-a --as parser`,
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin {
				d.File = args[0]
			}
			if err := need("file", d.File); err != nil {
				return err
			}
			if err := need("claim", d.Claim); err != nil {
				return err
			}
			d.defaultRole()
			if d.Artifact == "" {
				d.Artifact = mintArtifactID()
			}
			if d.Name == "" {
				d.Name = filepath.Base(d.File)
			}
			if d.Kind == "" {
				d.Kind = "file"
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			objs, err := g.objects()
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			content, size, err := putFile(c.Context(), objs, g.abs(d.File))
			if err != nil {
				return err
			}
			cmd := claim.PublishArtifact{Claim: d.Claim, Artifact: d.Artifact, Role: claim.Role(d.Role), Slot: d.Slot,
				Kind: d.Kind, Schema: d.Schema, Name: d.Name, Generation: d.Generation, Content: content, Size: size}
			res, err := l.SubmitClaim(c.Context(), cmd, ledger.WriteOptions{Actor: actor, RequestID: d.RequestID})
			if err != nil {
				return err
			}
			return g.printClaimWrite(l, d.Claim, res, func(w io.Writer, v *claim.View, res []ledger.Result) {
				if a, ok := lookupArtifact(l, d.Claim, d.Artifact); ok {
					fmt.Fprintf(w, "%s: %s %d bytes, digest %s (content %s)\n", a.Artifact, a.Role, a.Size, a.Digest, a.Content)
				}
			})
		},
	}
	f := c.Flags()
	f.StringVar(&d.Claim, "claim", "", "the claim the artifact belongs to")
	f.StringVar(&d.Artifact, "id", "", "the artifact's id in the claim (default: a fresh art_xxxxxxxx)")
	f.StringVar(&d.Role, "role", "", "output, diagnostic or result (default: see above)")
	f.StringVar(&d.Slot, "slot", "", "the declared slot an output fills")
	f.StringVar(&d.Kind, "kind", "", "what it is: patch, test-log, report, … (default file)")
	f.StringVar(&d.Schema, "schema", "", "the format of its bytes: text/x-diff, go-test-json, …")
	f.StringVar(&d.Name, "name", "", "display name, not digested (default: the file's base name)")
	f.Uint64Var(&d.Generation, "generation", 0, "the receipt generation you hold (output and diagnostic)")
	f.StringVar(&d.RequestID, "request-id", "", "your id for this request")
	return c
}

// putFile streams a file into the store and checks the stored copy's size.
func putFile(ctx context.Context, objs *artifact.Store, path string) (artifact.ContentDigest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return artifact.ContentDigest{}, 0, usagef("file: %v", err)
	}
	defer f.Close()
	d, n, err := objs.Put(ctx, f)
	if err != nil {
		return d, n, err
	}
	// Put hashed the bytes as it wrote them; make sure the copy in place is
	// the one it wrote (a concurrent writer of other bytes cannot land there).
	if fi, err := os.Stat(objs.Path(d)); err != nil || fi.Size() != n {
		return d, n, fmt.Errorf("artifact store: the stored copy of %s is not %d bytes", d, n)
	}
	return d, n, nil
}

func newArtifactGet(g *global) *cobra.Command {
	var claimID, out string
	c := &cobra.Command{
		Use:   "get ID --claim C [-o FILE] | get CONTENT-DIGEST [-o FILE]",
		Short: "Read an artifact's bytes, verified against its digest first; a damaged copy is refused and nothing is written",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var d struct {
				Artifact string `json:"artifact"`
				Claim    string `json:"claim,omitempty"`
				Output   string `json:"output,omitempty"`
			}
			d.Claim, d.Output = claimID, out
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin {
				d.Artifact = args[0]
			}
			if g.json && d.Output == "" {
				return usagef("output: --json prints a description; give -o FILE for the bytes")
			}
			objs, err := g.objects()
			if err != nil {
				return err
			}
			what, content, art, err := g.resolveContent(d.Claim, d.Artifact)
			if err != nil {
				return err
			}
			rc, err := objs.Open(c.Context(), content)
			if err != nil {
				return storeError(what, err)
			}
			defer rc.Close()
			if d.Output == "" {
				_, err := io.Copy(g.io.Out, rc)
				return storeError(what, err)
			}
			path := g.abs(d.Output)
			if err := writeVerified(path, rc); err != nil {
				return storeError(what, err)
			}
			if g.json {
				b, _ := json.Marshal(art)
				return writeJSONDoc(g.io.Out, member("path", jsonString(path)), member("content", jsonString(content.String())), member("artifact", b))
			}
			return nil
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "the claim the artifact belongs to (not needed for a content digest)")
	c.Flags().StringVarP(&out, "output", "o", "", "write the bytes to FILE (atomically; default stdout)")
	return c
}

// resolveContent finds the content digest an argument names: an artifact of
// a claim, or (without --claim) a content digest itself.
func (g *global) resolveContent(claimID, id string) (string, artifact.ContentDigest, *claim.ArtifactView, error) {
	if claimID == "" {
		d, err := artifact.ParseContentDigest(id)
		if err != nil {
			return "", d, nil, usagef("claim: required unless the argument is a content digest (64 hex digits)")
		}
		return "content " + id, d, nil, nil
	}
	l, err := g.open()
	if err != nil {
		return "", artifact.ContentDigest{}, nil, err
	}
	defer l.Close()
	var ok, known bool
	var a claim.ArtifactView
	l.Read(func(st *ledger.State, _ store.Position) {
		_, known = st.Claims.Claim(claimID, g.io.Now())
		a, ok = st.Claims.Artifact(claimID, id)
	})
	if !known {
		return "", artifact.ContentDigest{}, nil, refuseUnknownClaim(claimID)
	}
	if !ok {
		return "", artifact.ContentDigest{}, nil, rule.NotFoundf("artifact", "claim "+claimID+" has no artifact "+strconv.Quote(id))
	}
	d, err := artifact.ParseContentDigest(a.Content)
	return "artifact " + id, d, &a, err
}

// writeVerified copies r to path through a temporary file renamed into
// place only when r ended without error (the store's reader reports a
// damaged copy instead of EOF), so a damaged copy leaves nothing behind.
func writeVerified(path string, r io.Reader) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tally-*")
	if err != nil {
		return err
	}
	_, err = io.Copy(tmp, r)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// storedArtifact is one row of `artifact ls` and `artifact verify`.
type storedArtifact struct {
	Claim string `json:"claim"`
	claim.ArtifactView
	Stored string `json:"stored"` // present | missing (ls); ok | missing | damaged (verify)
}

// claimArtifacts lists the artifacts of one claim, or of every claim.
func (g *global) claimArtifacts(l *ledger.Ledger, claimID string) ([]storedArtifact, error) {
	var out []storedArtifact
	var missing bool
	now := g.io.Now().UTC()
	l.Read(func(st *ledger.State, _ store.Position) {
		ids := []string{claimID}
		if claimID == "" {
			ids = ids[:0]
			for _, s := range st.Claims.List(claim.Filter{}, now) {
				ids = append(ids, s.Claim)
			}
		}
		for _, id := range ids {
			v, ok := st.Claims.Claim(id, now)
			if !ok {
				missing = true
				return
			}
			for _, a := range v.Artifacts {
				out = append(out, storedArtifact{Claim: id, ArtifactView: a})
			}
		}
	})
	if missing {
		return nil, refuseUnknownClaim(claimID)
	}
	return out, nil
}

func newArtifactLs(g *global) *cobra.Command {
	var claimID string
	c := &cobra.Command{
		Use:   "ls [--claim C]",
		Short: "List recorded artifacts (of one claim, or all) and whether their bytes are in the store",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var d struct {
				Claim string `json:"claim,omitempty"`
			}
			d.Claim = claimID
			if stdin, err := g.fromStdin(args, &d); err != nil {
				return err
			} else if len(args) == 1 && !stdin {
				return usagef("ls takes no argument; use --claim C")
			}
			objs, err := g.objects()
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			list, err := g.claimArtifacts(l, d.Claim)
			if err != nil {
				return err
			}
			for i := range list {
				list[i].Stored = "missing"
				if cd, err := artifact.ParseContentDigest(list[i].Content); err == nil && objs.Has(cd) {
					list[i].Stored = "present"
				}
			}
			return g.printArtifacts(list)
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "only this claim's artifacts")
	return c
}

func (g *global) printArtifacts(list []storedArtifact) error {
	if g.json {
		if list == nil {
			list = []storedArtifact{}
		}
		b, err := json.Marshal(list)
		if err != nil {
			return err
		}
		return writeJSONDoc(g.io.Out, member("artifacts", b))
	}
	if len(list) == 0 {
		fmt.Fprintln(g.io.Out, "no artifacts")
		return nil
	}
	t := newTable(g.io.Out)
	fmt.Fprintln(t, "CLAIM\tARTIFACT\tROLE\tSLOT\tKIND\tSIZE\tDIGEST\tPRODUCER\tSTORED")
	for _, a := range list {
		stored := a.Stored
		if stored != "present" && stored != "ok" {
			stored = paint(g.color(), ansiRed, stored)
		}
		fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", a.Claim, a.Artifact, a.Role, orDash(a.Slot), a.Kind, a.Size, short12(a.Digest), a.Producer, stored)
	}
	return t.Flush()
}

func newArtifactVerify(g *global) *cobra.Command {
	var claimID string
	c := &cobra.Command{
		Use:   "verify [ID] [--claim C]",
		Short: "Re-hash stored copies (one artifact, a claim's, or all): exit 1 if any is missing or damaged",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			var d struct {
				Artifact string `json:"artifact,omitempty"`
				Claim    string `json:"claim,omitempty"`
			}
			d.Claim = claimID
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin && len(args) == 1 {
				d.Artifact = args[0]
			}
			if d.Artifact != "" && d.Claim == "" {
				return usagef("claim: required with an artifact id")
			}
			objs, err := g.objects()
			if err != nil {
				return err
			}
			l, err := g.open()
			if err != nil {
				return err
			}
			defer l.Close()
			list, err := g.claimArtifacts(l, d.Claim)
			if err != nil {
				return err
			}
			if d.Artifact != "" {
				var one []storedArtifact
				for _, a := range list {
					if a.Artifact == d.Artifact {
						one = append(one, a)
					}
				}
				if len(one) == 0 {
					return rule.NotFoundf("artifact", "claim "+d.Claim+" has no artifact "+strconv.Quote(d.Artifact))
				}
				list = one
			}
			seen := map[string]string{}
			bad := 0
			for i := range list {
				st, ok := seen[list[i].Content]
				if !ok {
					st = "ok"
					cd, err := artifact.ParseContentDigest(list[i].Content)
					if err == nil {
						err = objs.Verify(c.Context(), cd)
					}
					switch {
					case err == nil:
					case errors.Is(err, artifact.ErrNotFound):
						st = "missing"
					case artifact.IsDamaged(err):
						st = "damaged"
					default:
						return err
					}
					seen[list[i].Content] = st
				}
				list[i].Stored = st
				if st != "ok" {
					bad++
				}
			}
			if err := g.printArtifacts(list); err != nil {
				return err
			}
			if bad > 0 {
				if !g.json {
					fmt.Fprintf(g.io.Err, "tally: %d artifact(s) missing or damaged\n", bad)
				}
				return silentExit{}
			}
			return nil
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "only this claim's artifacts")
	return c
}
