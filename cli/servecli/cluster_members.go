package servecli

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
)

// newClusterMembers is tally cluster members: each member's addresses and
// liveness as the node asked sees it.
func newClusterMembers(g cli.Env, addr *string) *cobra.Command {
	return &cobra.Command{
		Use: "members", Short: "The members: id, addresses, zone, and liveness (state, incarnation, health score, predicted round trip, grants used) as the node sees it", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			raw, ms, err := clusterMembers(g, c.Context(), *addr)
			if err != nil {
				return err
			}
			if g.JSON() {
				_, err := g.IO().Out.Write(raw)
				return err
			}
			return printClusterMembers(g, ms)
		},
	}
}

// clusterMembers asks the node for its members document.
func clusterMembers(g cli.Env, ctx context.Context, addr string) ([]byte, cluster.Members, error) {
	var ms cluster.Members
	raw, err := clusterGet(g, ctx, addr, cluster.MembersPath, "cluster members", &ms)
	return raw, ms, err
}

func printClusterMembers(g cli.Env, ms cluster.Members) error {
	t := tabwriter.NewWriter(g.IO().Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "ID\tRAFT\tADDR\tZONE\tSTATE\tINCARNATION\tHEALTH\tRTT\tGRANTS")
	for _, m := range ms.Members {
		rtt := "-"
		switch {
		case m.ID == ms.NodeID:
			rtt = "(self)"
		case m.RTTKnown:
			rtt = fmt.Sprintf("%.1fms±%.1f", m.RTTMillis, m.RTTErrorMillis)
		}
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\n", m.ID, m.RaftAddr, m.Addr, m.Zone, m.State, m.Incarnation, m.HealthScore, rtt, m.GrantsUsed)
	}
	return t.Flush()
}
