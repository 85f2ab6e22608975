package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/claim"
	"tally/digest"
	"tally/service"
)

// CodeDamaged is the --json error code of a stored copy whose bytes no
// longer match its digest.
const CodeDamaged = service.CodeDamaged

func newArtifactCmd(g *global) *cobra.Command {
	c := &cobra.Command{
		Use:   "artifact",
		Short: "Content-addressed artifacts: bytes in <ledger>/objects, verified on every read, recorded in a claim",
	}
	c.AddCommand(newArtifactPut(g), newArtifactGet(g), newArtifactLs(g), newArtifactVerify(g), newArtifactReceive(g), newArtifactCollect(g))
	return c
}

// newArtifactReceive records the artifact receipt: the claimant observed
// one output or diagnostic artifact (pinned by its digest).
func newArtifactReceive(g *global) *cobra.Command {
	var d struct {
		api.ClaimArtifactRef
		WithRequestID
	}
	c := &cobra.Command{
		Use:     "receive CLAIM ARTIFACT [--digest D] | receive -",
		Short:   "Record that you (the claimant) observed an output or diagnostic artifact: its artifact receipt",
		Example: `  tally artifact receive C17 diag-1 --as maintainer`,
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(c *cobra.Command, args []string) error {
			if err := g.claimPair(args, &d, &d.Claim, &d.Artifact, "receive takes CLAIM ARTIFACT"); err != nil {
				return err
			}
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				return svc.ReceiveArtifact(c.Context(), call, d.ClaimArtifactRef)
			}, printArtifactReceipt(d.Artifact))
		},
	}
	c.Flags().StringVar(&d.Digest, "digest", "", "the artifact digest you observed (default: the recorded one)")
	d.requestIDFlag(c.Flags())
	return c
}

func printArtifactReceipt(id string) claimHuman {
	return func(w io.Writer, v *claim.View, _ []service.ClaimRecord) {
		if a, ok := v.FindArtifact(id); ok {
			fmt.Fprintf(w, "%s: artifact %s received (digest %s, seq %d)\n", v.Claim, a.Artifact, a.Digest, a.ReceivedSeq)
		}
	}
}

// putDoc is `tally artifact put -`'s document (the artifact's description,
// api.ClaimPublish, the file whose bytes it has, and request_id) and the put
// flags.
type putDoc struct {
	api.ClaimPublish
	File string `json:"file"`
	WithRequestID
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
			return g.claimWrite(d.RequestID, func(svc cliService, call service.Call) (service.ClaimWritten, error) {
				f, err := os.Open(g.abs(d.File))
				if err != nil {
					return service.ClaimWritten{}, usagef("file: %v", err)
				}
				defer f.Close()
				return svc.PublishArtifact(c.Context(), call, d.ClaimPublish, f)
			}, d.printPut)
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
	d.requestIDFlag(f)
	return c
}

// printPut prints the artifact put recorded.
func (d *putDoc) printPut(w io.Writer, v *claim.View, _ []service.ClaimRecord) {
	if a, ok := v.FindArtifact(d.Artifact); ok {
		fmt.Fprintf(w, "%s: %s %d bytes, digest %s (content %s)\n", a.Artifact, a.Role, a.Size, a.Digest, a.Content)
	}
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
			var content digest.ContentDigest
			if d.Claim == "" {
				if content, err = digest.ParseContentDigest(d.Artifact); err != nil {
					return usagef("claim: required unless the argument is a content digest (64 hex digits)")
				}
			}
			svc, call, err := g.actorReader(g.io.Now())
			if err != nil {
				return err
			}
			var ac service.ArtifactContent
			if d.Claim == "" {
				ac, err = svc.Content(c.Context(), call, content)
			} else {
				ac, err = svc.Artifact(c.Context(), call, d.Claim, d.Artifact)
			}
			if err != nil {
				return err
			}
			defer ac.Body.Close()
			path := ""
			if d.Output != "" {
				path = g.abs(d.Output)
			}
			if err := g.copyContent(ac, path); err != nil || !g.json {
				return err
			}
			art := ac.Artifact
			if d.Claim == "" {
				art = nil // asked by content, not by an artifact
			}
			b, err := json.Marshal(art)
			if err != nil {
				return err
			}
			return writeJSONDoc(g.io.Out, member("path", jsonString(path)), member("content", jsonString(ac.Content.String())), member("artifact", b))
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "the claim the artifact belongs to (not needed for a content digest)")
	c.Flags().StringVarP(&out, "output", "o", "", "write the bytes to FILE (atomically; default stdout)")
	return c
}

// copyContent writes the bytes to path, atomically, or with path "" to
// stdout: at once when the whole content was verified before the first
// byte, else only once all of it has checked out. Bytes that do not check
// out write nothing.
func (g *global) copyContent(ac service.ArtifactContent, path string) error {
	if path != "" {
		return writeVerified(path, ac.Body)
	}
	if ac.Checked {
		_, err := io.Copy(g.io.Out, ac.Body)
		return err
	}
	tmp, err := os.CreateTemp("", "tally-get-*")
	if err != nil {
		return fmt.Errorf("download %s: %w", ac.Content, err)
	}
	defer os.Remove(tmp.Name())
	defer tmp.Close()
	if _, err := io.Copy(tmp, ac.Body); err != nil {
		return err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("download %s: %w", ac.Content, err)
	}
	_, err = io.Copy(g.io.Out, tmp)
	return err
}

// writeVerified copies r to path through a temporary file renamed into
// place only when r ended without error (a verifying reader reports bytes
// that are not their content instead of EOF), so a damaged copy leaves
// nothing behind.
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
			list, err := g.listArtifacts(c.Context(), service.ArtifactQuery{Claim: d.Claim})
			if err != nil {
				return err
			}
			return g.printArtifacts(list)
		},
	}
	c.Flags().StringVar(&claimID, "claim", "", "only this claim's artifacts")
	return c
}

// listArtifacts lists artifacts and the custody of their bytes. Through a
// server it is the server that checks (and, verifying, re-hashes) its own
// copies: custody is the server's, and nothing is downloaded.
func (g *global) listArtifacts(ctx context.Context, q service.ArtifactQuery) (service.ArtifactList, error) {
	svc, call, err := g.actorReader(time.Time{})
	if err != nil {
		return service.ArtifactList{}, err
	}
	return svc.ListArtifacts(ctx, call, q)
}

func (g *global) printArtifacts(list service.ArtifactList) error {
	if g.json {
		_, err := g.io.Out.Write(list.JSON)
		return err
	}
	if len(list.Artifacts) == 0 {
		fmt.Fprintln(g.io.Out, "no artifacts")
		return nil
	}
	t := newTable(g.io.Out)
	fmt.Fprintln(t, "CLAIM\tARTIFACT\tROLE\tSLOT\tKIND\tSIZE\tDIGEST\tPRODUCER\tSTORED")
	for _, a := range list.Artifacts {
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
	var whole bool
	c := &cobra.Command{
		Use:   "verify [ID] [--claim C] | verify --store",
		Short: "Re-hash stored copies (one artifact, a claim's, all the session's, or with --store every object of the directory): exit 1 if any is missing or damaged",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if whole {
				if len(args) > 0 || claimID != "" {
					return usagef("store: takes no artifact or --claim (it checks every object)")
				}
				return g.verifyStore(c.Context())
			}
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
			list, err := g.listArtifacts(c.Context(), service.ArtifactQuery{Claim: d.Claim, Artifact: d.Artifact, Verify: true})
			if err != nil {
				return err
			}
			if err := g.printArtifacts(list); err != nil {
				return err
			}
			bad := 0
			for _, a := range list.Artifacts {
				if a.Stored != "ok" {
					bad++
				}
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
	c.Flags().BoolVar(&whole, "store", false, "re-hash every object of the local content store (a ledger directory's, or a cluster node's with --dir D/ledger), referenced or not")
	return c
}
