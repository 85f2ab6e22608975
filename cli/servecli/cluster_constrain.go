package servecli

// tally cluster constrain TENANT[/SESSION] --regions R1,R2 | --zones
// Z1,Z2 | --clear: where a tenant's or a session's groups keep their
// voters, recorded in the meta group through a node, signed with the join
// secret.

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
)

func newClusterConstrain(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	var regions, zones []string
	var clear bool
	c := &cobra.Command{
		Use:   "constrain TENANT[/SESSION] (--regions R1,R2 | --zones Z1,Z2 | --clear)",
		Short: "Keep a tenant's or a session's voters in some regions or zones (refused when no live members can meet it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			tenant, session, _ := strings.Cut(args[0], "/")
			e := replica.ConstraintEntry{Tenant: tenant, Session: session, Clear: clear}
			e.Regions, e.Zones = regions, zones
			if err := replica.CheckConstraintEntry(e); err != nil {
				return cli.Usagef("%v", err)
			}
			s, err := secret()
			if err != nil {
				return err
			}
			body := func(t cluster.Target) any {
				return cluster.Sign(s, t, cluster.ConstrainRequest{Tenant: tenant, Session: session, Regions: regions, Zones: zones, Clear: clear})
			}
			return clusterPrint(g, c.Context(), *addr, cluster.ConstrainPath, body, func(raw []byte) error {
				var a cluster.Constrained
				if err := json.Unmarshal(raw, &a); err != nil {
					return fmt.Errorf("constrain: the node's answer: %w", err)
				}
				out := g.IO().Out
				if a.Clear {
					_, err := fmt.Fprintf(out, "%s: no constraint\n", a.Of())
					return err
				}
				if a.PlacedIn != 0 {
					fmt.Fprintf(out, "%s placed in group %d (from group %d), whose voters meet it\n", a.Of(), a.PlacedIn, a.PlacedFrom)
				}
				groups := joinIDs(a.Groups)
				if groups == "" {
					groups = "none yet"
				}
				_, err := fmt.Fprintf(out, "%s constrained to %s; groups bound: %s (tally cluster status)\n", a.Of(), a.Constraint, groups)
				return err
			})
		},
	}
	c.Flags().StringSliceVar(&regions, "regions", nil, "the regions its voters stay in (nodes' --region)")
	c.Flags().StringSliceVar(&zones, "zones", nil, "the zones its voters stay in (nodes' --zone)")
	c.Flags().BoolVar(&clear, "clear", false, "remove its constraint")
	return c
}
