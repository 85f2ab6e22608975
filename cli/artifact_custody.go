package cli

// The content store as a whole: `artifact verify --store` re-hashes every
// object of a ledger directory (or of a cluster node's, D/ledger), and
// `artifact collect` removes the bytes no record references.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"tally/artifact"
	"tally/ledgerservice"
	"tally/store"
)

// storeObject is one row of `artifact verify --store`.
type storeObject struct {
	Content string `json:"content"`
	Size    int64  `json:"size"`
	Stored  string `json:"stored"`
	Error   string `json:"error,omitempty"`
}

// verifyStore re-hashes every object of the local content store, prints
// each, and exits 1 if any is damaged.
func (g *global) verifyStore(ctx context.Context) error {
	if g.remoteURL() != "" {
		return usagef("store: --store re-hashes a local directory's content store; run it where the server's directory is (a cluster node's: --dir D/ledger), or without --store to have the server re-hash its recorded artifacts")
	}
	root, err := g.ledgerRoot()
	if err != nil {
		return err
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(root))
	if err != nil {
		return err
	}
	list, err := objs.Objects()
	if err != nil {
		return err
	}
	rows := make([]storeObject, 0, len(list))
	bad := 0
	for _, o := range list {
		c, err := objs.Check(ctx, o, 0)
		if err != nil {
			return fmt.Errorf("verify %s: %w", o.Content, err)
		}
		row := storeObject{Content: o.Content.String(), Size: o.Size, Stored: c.State}
		if c.Err != nil {
			row.Error = c.Err.Error()
			bad++
		}
		rows = append(rows, row)
	}
	if g.json {
		b, err := json.Marshal(rows)
		if err != nil {
			return err
		}
		if err := writeJSONDoc(g.io.Out, member("objects", b)); err != nil {
			return err
		}
	} else {
		t := newTable(g.io.Out)
		fmt.Fprintln(t, "CONTENT\tSIZE\tSTORED")
		for _, r := range rows {
			stored := r.Stored
			if stored != artifact.StateOK {
				stored = paint(g.color(), ansiRed, stored)
			}
			fmt.Fprintf(t, "%s\t%d\t%s\n", r.Content, r.Size, stored)
		}
		if err := t.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(g.io.Err, "tally: %d object(s) checked, %d damaged\n", len(rows), bad)
	}
	if bad > 0 {
		return silentExit{}
	}
	return nil
}

func newArtifactCollect(g *global) *cobra.Command {
	var grace time.Duration
	c := &cobra.Command{
		Use:   "collect [--grace 24h]",
		Short: "Remove stored bytes no record references (a refused publish's, an upload cut off) last put more than --grace ago",
		Long: "Remove from the content store the bytes no record of any session references, once they were\n" +
			"last put more than --grace ago. It decides under the store's collection lock, which every\n" +
			"publication holds from its bytes' put until its record is appended, so bytes about to be\n" +
			"referenced are never removed. A server collects its own every --collect-every.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if grace < 0 {
				return usagef("grace: must not be negative")
			}
			svc, err := g.service()
			if err != nil {
				return err
			}
			local, ok := svc.(*ledgerservice.Local)
			if !ok {
				return usagef("collect works on a local ledger directory only; unset TALLY_URL to run it")
			}
			got, err := local.CollectArtifacts(c.Context(), grace)
			if err != nil {
				return err
			}
			if g.json {
				return writeJSONDoc(g.io.Out, member("objects", fmt.Appendf(nil, "%d", len(got.Objects))),
					member("staged", fmt.Appendf(nil, "%d", got.Staged)), member("bytes", fmt.Appendf(nil, "%d", got.Bytes)))
			}
			for _, o := range got.Objects {
				fmt.Fprintf(g.io.Out, "collected %s (%d bytes)\n", o.Content, o.Size)
			}
			fmt.Fprintf(g.io.Out, "%d object(s) and %d staged file(s) collected, %d bytes\n", len(got.Objects), got.Staged, got.Bytes)
			return nil
		},
	}
	c.Flags().DurationVar(&grace, "grace", 24*time.Hour, "keep unreferenced bytes put more recently than this")
	return c
}
