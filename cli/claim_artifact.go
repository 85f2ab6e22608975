package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/ledger"
	"tally/server"
	"tally/store"
)

// CodeDamaged is the --json error code of a stored copy whose bytes no
// longer match its digest.
const CodeDamaged = server.CodeDamaged

// objects opens the content store of the ledger in use: <ledger>/objects,
// shared by every session of the ledger.
func (g *global) objects() (*artifact.Store, error) {
	root, err := g.ledgerRoot()
	if err != nil {
		return nil, err
	}
	return artifact.OpenStore(store.ObjectsDir(root))
}

// openWithObjects opens the local ledger and its content store.
func (g *global) openWithObjects() (*ledger.Ledger, *artifact.Store, error) {
	objs, err := g.objects()
	if err != nil {
		return nil, nil, err
	}
	l, err := g.open()
	if err != nil {
		return nil, nil, err
	}
	return l, objs, nil
}

// storeError turns a content store error about one artifact into a refusal
// (the server refuses with the same words).
func storeError(what string, err error) error { return server.ArtifactReadError(what, err) }

func newArtifactCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "artifact",
		Short: "Content-addressed artifacts: bytes in <ledger>/objects, verified on every read, recorded in a claim",
	}
	c.AddCommand(newArtifactPut(g), newArtifactGet(g), newArtifactLs(g), newArtifactVerify(g), newArtifactReceive(g))
	return c
}

// newArtifactReceive records the artifact receipt: the claimant observed
// one output or diagnostic artifact (pinned by its digest).
func newArtifactReceive(g *global) *cobra.Command {
	var d struct {
		api.ClaimArtifactRef
		RequestID string `json:"request_id,omitempty"`
	}
	c := &cobra.Command{
		Use:     "receive CLAIM ARTIFACT [--digest D] | receive -",
		Short:   "Record that you (the claimant) observed an output or diagnostic artifact: its artifact receipt",
		Example: `  tally artifact receive C17 diag-1 --as maintainer`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			stdin, err := g.fromStdin(args, &d)
			if err != nil {
				return err
			}
			if !stdin {
				if len(args) != 2 {
					return usagef("receive takes CLAIM ARTIFACT (or - for a JSON document on stdin)")
				}
				d.Claim, d.Artifact = args[0], args[1]
			}
			return g.claimWrite(c, d.Command(), d.Claim, d.RequestID, printArtifactReceipt(d.Artifact))
		},
	}
	c.Flags().StringVar(&d.Digest, "digest", "", "the artifact digest you observed (default: the recorded one)")
	c.Flags().StringVar(&d.RequestID, "request-id", "", "your id for this request")
	return c
}

func printArtifactReceipt(id string) func(w io.Writer, v *claim.View, _ []ledger.Result) {
	return func(w io.Writer, v *claim.View, _ []ledger.Result) {
		if a, ok := server.ViewArtifact(v, id); ok {
			fmt.Fprintf(w, "%s: artifact %s received (digest %s, seq %d)\n", v.Claim, a.Artifact, a.Digest, a.ReceivedSeq)
		}
	}
}

// putDoc is `tally artifact put -`'s document (the artifact's description,
// api.ClaimPublish, the file whose bytes it has, and request_id) and the put
// flags.
type putDoc struct {
	api.ClaimPublish
	File      string `json:"file"`
	RequestID string `json:"request_id,omitempty"`
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
			if d.Artifact == "" {
				d.Artifact = mintArtifactID()
			}
			if d.Name == "" {
				d.Name = filepath.Base(d.File)
			}
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				return g.artifactPutRemote(c, rc, &d)
			}
			actor, err := g.requireActor("")
			if err != nil {
				return err
			}
			l, objs, err := g.openWithObjects()
			if err != nil {
				return err
			}
			defer l.Close()
			content, size, err := putFile(c.Context(), objs, g.abs(d.File))
			if err != nil {
				return err
			}
			cmd := d.Command()
			cmd.Content, cmd.Size = content, size
			_, err = g.write(c, l, ledger.Command{Claim: cmd}, actor, d.RequestID, []byte(content.String()), claimAnswer(d.Claim, cmd, d.printPut))
			return err
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

// printPut prints the artifact put recorded.
func (d *putDoc) printPut(w io.Writer, v *claim.View, _ []ledger.Result) {
	if a, ok := server.ViewArtifact(v, d.Artifact); ok {
		fmt.Fprintf(w, "%s: %s %d bytes, digest %s (content %s)\n", a.Artifact, a.Role, a.Size, a.Digest, a.Content)
	}
}

// query is the put's description as the server's PUT route reads it.
func (d *putDoc) query() url.Values {
	q := url.Values{"role": {d.Role}, "kind": {d.Kind}, "name": {d.Name}}
	if d.Slot != "" {
		q.Set("slot", d.Slot)
	}
	if d.Schema != "" {
		q.Set("schema", d.Schema)
	}
	if d.Generation > 0 {
		q.Set("generation", strconv.FormatUint(d.Generation, 10))
	}
	return q
}

// artifactPutRemote streams the file to the server's content store, which
// records the artifact as the token's identity.
func (g *global) artifactPutRemote(c *cobra.Command, rc *client, d *putDoc) error {
	if _, err := rc.identity(c.Context()); err != nil {
		return err
	}
	f, err := os.Open(g.abs(d.File))
	if err != nil {
		return usagef("file: %v", err)
	}
	defer f.Close()
	b, err := rc.putArtifact(c.Context(), d.Claim, d.Artifact, d.query(), f, d.RequestID)
	if err != nil {
		return err
	}
	return g.printRemoteWrites(d.printPut, b)
}

// putFile streams a file into the store and checks the stored copy's size.
func putFile(ctx context.Context, objs *artifact.Store, path string) (digest.ContentDigest, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return digest.ContentDigest{}, 0, usagef("file: %v", err)
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
			rc, err := g.remote()
			if err != nil {
				return err
			}
			var objs *artifact.Store
			if rc == nil {
				if objs, err = g.objects(); err != nil {
					return err
				}
			}
			what, content, art, err := g.resolveContent(c.Context(), rc, d.Claim, d.Artifact)
			if err != nil {
				return err
			}
			path := ""
			if d.Output != "" {
				path = g.abs(d.Output)
			}
			if rc != nil {
				u := rc.path(nil, "objects", content.String())
				if art != nil {
					u = rc.path(nil, "claims", d.Claim, "artifacts", art.Artifact)
				}
				err = g.fetchContent(c.Context(), rc, u, what, content, path)
			} else {
				err = getLocal(c.Context(), objs, what, content, path, g.io.Out)
			}
			if err != nil || !g.json {
				return err
			}
			b, err := json.Marshal(art)
			if err != nil {
				return err
			}
			return writeJSONDoc(g.io.Out, member("path", jsonString(path)), member("content", jsonString(content.String())), member("artifact", b))
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "the claim the artifact belongs to (not needed for a content digest)")
	c.Flags().StringVarP(&out, "output", "o", "", "write the bytes to FILE (atomically; default stdout)")
	return c
}

// getLocal copies the verified bytes of content to path (atomically), or
// to out when path is "".
func getLocal(ctx context.Context, objs *artifact.Store, what string, content digest.ContentDigest, path string, out io.Writer) error {
	rc, err := objs.Open(ctx, content)
	if err != nil {
		return storeError(what, err)
	}
	defer rc.Close()
	if path == "" {
		_, err = io.Copy(out, rc)
	} else {
		err = writeVerified(path, rc)
	}
	return storeError(what, err)
}

// resolveContent finds the content digest an argument names: an artifact of
// a claim (in the local ledger or the server's), or (without --claim) a
// content digest itself.
func (g *global) resolveContent(ctx context.Context, rc *client, claimID, id string) (string, digest.ContentDigest, *claim.ArtifactView, error) {
	if claimID == "" {
		d, err := digest.ParseContentDigest(id)
		if err != nil {
			return "", d, nil, usagef("claim: required unless the argument is a content digest (64 hex digits)")
		}
		return "content " + id, d, nil, nil
	}
	var v claim.View
	if rc != nil {
		var err error
		if _, v, err = rc.claim(ctx, claimID, g.io.Now()); err != nil {
			return "", digest.ContentDigest{}, nil, err
		}
	} else {
		l, err := g.open()
		if err != nil {
			return "", digest.ContentDigest{}, nil, err
		}
		defer l.Close()
		if v, err = g.claimView(l, claimID, g.io.Now()); err != nil {
			return "", digest.ContentDigest{}, nil, err
		}
	}
	a, ok := server.ViewArtifact(&v, id)
	if !ok {
		return "", digest.ContentDigest{}, nil, server.UnknownArtifact(claimID, id)
	}
	d, err := digest.ParseContentDigest(a.Content)
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

// claimArtifacts lists the artifacts of one claim, or of every claim.
func (g *global) claimArtifacts(l *ledger.Ledger, claimID string) ([]server.StoredArtifact, error) {
	var out []server.StoredArtifact
	var err error
	l.Read(func(st *ledger.State) {
		out, err = server.ArtifactRows(st, claimID, g.io.Now().UTC())
	})
	return out, err
}

// artifacts lists artifacts through the server: stored present or
// missing, or with verify the server's re-hash of its own copies.
func (rc *client) artifacts(ctx context.Context, claimID, id string, verify bool) ([]server.StoredArtifact, error) {
	q := url.Values{}
	if claimID != "" {
		q.Set("claim", claimID)
	}
	if id != "" {
		q.Set("artifact", id)
	}
	if verify {
		q.Set("verify", "true")
	}
	b, err := rc.do(ctx, "GET", rc.path(q, "artifacts"), nil, "")
	if err != nil {
		return nil, err
	}
	m, err := members(b)
	if err != nil {
		return nil, err
	}
	var rows []server.StoredArtifact
	return rows, decodeMember(m, "artifacts", &rows)
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
			if rc, err := g.remote(); err != nil || rc != nil {
				if err != nil {
					return err
				}
				list, err := rc.artifacts(c.Context(), d.Claim, "", false)
				if err != nil {
					return err
				}
				return g.printArtifacts(list)
			}
			l, objs, err := g.openWithObjects()
			if err != nil {
				return err
			}
			defer l.Close()
			list, err := g.claimArtifacts(l, d.Claim)
			if err != nil {
				return err
			}
			server.MarkPresent(objs, list)
			return g.printArtifacts(list)
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "only this claim's artifacts")
	return c
}

func (g *global) printArtifacts(list []server.StoredArtifact) error {
	if g.json {
		doc, err := server.ArtifactsDoc(list)
		if err != nil {
			return err
		}
		_, err = g.io.Out.Write(doc)
		return err
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
			list, bad, err := g.verifyArtifacts(c.Context(), d.Claim, d.Artifact)
			if err != nil {
				return err
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

// verifyArtifacts re-hashes the stored copies of one artifact, of a claim's
// or of all, and returns the rows and how many are missing or damaged.
// Through a server it is the server that re-hashes its own copies: custody
// is the server's, and nothing is downloaded.
func (g *global) verifyArtifacts(ctx context.Context, claimID, id string) ([]server.StoredArtifact, int, error) {
	rc, err := g.remote()
	if err != nil {
		return nil, 0, err
	}
	if rc != nil {
		list, err := rc.artifacts(ctx, claimID, id, true)
		if err != nil {
			return nil, 0, err
		}
		bad := 0
		for _, a := range list {
			if a.Stored != "ok" {
				bad++
			}
		}
		return list, bad, nil
	}
	l, objs, err := g.openWithObjects()
	if err != nil {
		return nil, 0, err
	}
	defer l.Close()
	list, err := g.claimArtifacts(l, claimID)
	if err == nil && id != "" {
		list, err = server.SelectArtifact(list, claimID, id)
	}
	if err != nil {
		return nil, 0, err
	}
	bad, err := server.VerifyRows(ctx, objs, list)
	return list, bad, err
}
