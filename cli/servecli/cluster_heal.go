package servecli

// tally cluster mark-dead N, drain N (signed with the join secret) and
// tally cluster decisions (the placement driver's recent decisions).

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
)

// newClusterHeal is mark-dead and drain; signedNode reads the secret and
// the node id argument.
func newClusterHeal(g cli.Env, addr *string, signedNode func(string) (string, uint64, error)) []*cobra.Command {
	markDead := &cobra.Command{
		Use:   "mark-dead N",
		Short: "Commit a node dead: the placement driver replaces its replicas on live nodes (refused for the node asked and a group's last voter)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, id, err := signedNode(args[0])
			if err != nil {
				return err
			}
			body := func(t cluster.Target) any { return cluster.Sign(s, t, cluster.MarkDeadRequest{ID: id}) }
			return clusterPost(g, c.Context(), *addr, cluster.MarkDeadPath, body, fmt.Sprintf("node %d is dead: its replicas are replaced on live nodes (tally cluster status); it comes back only as a new learner", id))
		},
	}
	drain := &cobra.Command{
		Use:   "drain N",
		Short: "Move every replica off a node (refused when the others cannot hold them); then remove-node",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, id, err := signedNode(args[0])
			if err != nil {
				return err
			}
			body := func(t cluster.Target) any { return cluster.Sign(s, t, cluster.DrainRequest{ID: id}) }
			return clusterPost(g, c.Context(), *addr, cluster.DrainPath, body, fmt.Sprintf("node %d is draining: its replicas move off it (tally cluster groups); then tally cluster remove-node %d", id, id))
		},
	}
	return []*cobra.Command{markDead, drain}
}

func printClusterDecisions(g cli.Env, st cluster.Status) error {
	t := tabwriter.NewWriter(g.IO().Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "ID\tGROUP\tOP\tNODE\tSTATE\tMADE\tREASON")
	for _, d := range st.Placement.Decisions {
		reason := d.Reason
		if d.Error != "" {
			reason += " (" + d.Error + ")"
		}
		fmt.Fprintf(t, "%d\t%d\t%s\t%d\t%s\t%s\t%s\n", d.ID, d.Group, d.Op, d.Node, d.State, time.Unix(0, d.Made).UTC().Format(time.RFC3339), reason)
	}
	return t.Flush()
}

// printPlacement is what status says of the placement: the factor, the
// weakest tolerance, the groups short of their goal.
func printPlacement(g cli.Env, st cluster.Status) error {
	p := st.Placement
	factor := fmt.Sprint(p.Replicas)
	if p.Replicas == 0 {
		factor = "every member (none configured)"
	}
	out := g.IO().Out
	fmt.Fprintf(out, "replicas: %s\n", factor)
	if len(p.Draining) > 0 {
		fmt.Fprintf(out, "draining: %s\n", joinIDs(p.Draining))
	}
	fmt.Fprintf(out, "placement: %s\n", p.Tolerance)
	for _, gp := range p.Groups {
		constraint := ""
		if gp.Constraint != nil {
			constraint = " (constrained to " + gp.Constraint.String() + ")"
		}
		fmt.Fprintf(out, "  group %d%s: %s\n", gp.Group, constraint, gp.Tolerance.Summary)
	}
	for _, s := range p.Short {
		fmt.Fprintf(out, "group %d short of its goal: %s\n", s.Group, s.Why)
	}
	return nil
}

func joinIDs(ids []uint64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
