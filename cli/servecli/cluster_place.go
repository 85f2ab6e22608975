package servecli

// tally cluster place TENANT/SESSION --group G and tally cluster
// placements: the directory's recorded placements, through a node, signed
// with the join secret.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
	"tally/sessionname"
)

// placeOptions are tally cluster place's.
type placeOptions struct {
	addr    *string
	secret  func() (string, error)
	session string // TENANT/SESSION
	group   uint64
}

func newClusterPlace(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	o := &placeOptions{addr: addr, secret: secret}
	c := &cobra.Command{
		Use:   "place TENANT/SESSION --group G",
		Short: "Place a session that holds no record yet in a data group: its group fences it, then the directory records it (run again to complete one that failed)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			o.session = args[0]
			return runPlace(c.Context(), g, o)
		},
	}
	c.Flags().Uint64Var(&o.group, "group", 0, "the data group (see tally cluster groups)")
	return c
}

func runPlace(ctx context.Context, g cli.Env, o *placeOptions) error {
	tenant, session, err := splitSession(o.session)
	if err != nil {
		return err
	}
	if o.group == 0 {
		return cli.Usagef("group: required: the data group to place the session in (see tally cluster groups)")
	}
	s, err := o.secret()
	if err != nil {
		return err
	}
	body := func(t cluster.Target) any {
		return cluster.Sign(s, t, cluster.PlaceRequest{Tenant: tenant, Session: session, Group: o.group})
	}
	return clusterPrint(g, ctx, *o.addr, cluster.PlacePath, body, func(raw []byte) error {
		var p cluster.Placed
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("place: the node's answer: %w", err)
		}
		if !p.Recorded {
			_, err := fmt.Fprintf(g.IO().Out, "%s/%s is in group %d, its hash's: nothing to record\n", p.Tenant, p.Session, p.Group)
			return err
		}
		_, err := fmt.Fprintf(g.IO().Out, "%s/%s placed in group %d (its hash's is %d); every node routes it there\n", p.Tenant, p.Session, p.Group, p.HashGroup)
		return err
	})
}

// splitSession reads TENANT/SESSION, each name of the shape a ledger takes.
func splitSession(arg string) (string, string, error) {
	tenant, session, ok := strings.Cut(arg, "/")
	if !ok {
		return "", "", cli.Usagef("session: %q is not TENANT/SESSION", arg)
	}
	for _, f := range []struct{ field, name string }{{"tenant", tenant}, {"session", session}} {
		if err := sessionname.Check(f.field, f.name); err != nil {
			return "", "", cli.Usagef("session: %q: %v", arg, err)
		}
	}
	return tenant, session, nil
}

// placementsOptions are tally cluster placements'.
type placementsOptions struct {
	addr   *string
	secret func() (string, error)
}

func newClusterPlacements(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	o := &placementsOptions{addr: addr, secret: secret}
	return &cobra.Command{
		Use:   "placements",
		Short: "The directory's recorded placements: each placed session and its group (signed with the join secret)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return runPlacements(c.Context(), g, o) },
	}
}

func runPlacements(ctx context.Context, g cli.Env, o *placementsOptions) error {
	s, err := o.secret()
	if err != nil {
		return err
	}
	// The node answers a page at a time (cluster.PlacementsPageMax); the
	// pages are read in turn and printed as one list, as before.
	var all cluster.Placements
	var first []byte
	for after := ""; ; {
		raw, err := clusterCall(g, ctx, *o.addr, cluster.PlacementsPath, func(t cluster.Target) any { return cluster.SignPlacementsAfter(s, t, g.IO().Now(), after) })
		if err != nil {
			return err
		}
		if first == nil {
			first = raw
		}
		var doc cluster.Placements
		if err := json.Unmarshal(raw, &doc); err != nil {
			return fmt.Errorf("placements: the node's answer: %w", err)
		}
		all.SchemaVersion = doc.SchemaVersion
		all.Placements = append(all.Placements, doc.Placements...)
		if doc.Next == "" || doc.Next <= after {
			break
		}
		after = doc.Next
	}
	if all.Placements == nil {
		all.Placements = []replica.Placement{}
	}
	if g.JSON() {
		if all.Next = ""; len(all.Placements) <= cluster.PlacementsPageMax {
			_, err := g.IO().Out.Write(first) // one page: the node's answer as it is
			return err
		}
		return json.NewEncoder(g.IO().Out).Encode(all)
	}
	return printPlacements(g, all.Placements)
}

func printPlacements(g cli.Env, ps []replica.Placement) error {
	if len(ps) == 0 {
		_, err := fmt.Fprintln(g.IO().Out, "no placements recorded: every session is in its hash's group")
		return err
	}
	t := tabwriter.NewWriter(g.IO().Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "SESSION\tGROUP")
	for _, p := range ps {
		fmt.Fprintf(t, "%s\t%d\n", p.Name(), p.Group)
	}
	return t.Flush()
}
