package servecli

// tally cluster groups add [--count K]: data groups added to the cluster,
// each started on the replication factor's worth of the least loaded
// members (signed with the join secret).

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
)

// withGroupsAdd gives tally cluster groups its add subcommand.
func withGroupsAdd(groups *cobra.Command, g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	var count int
	add := &cobra.Command{
		Use:   "add [--count K]",
		Short: "Add data groups: each starts on the replication factor's worth of the least loaded members, and sessions reach it by a placement, a move or the driver spreading them",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := replica.CheckGroupsCount(count, 0); err != nil {
				return cli.Usagef("%s", err.Error())
			}
			s, err := secret()
			if err != nil {
				return err
			}
			body := func(t cluster.Target) any { return cluster.Sign(s, t, cluster.GroupsAddRequest{Count: count}) }
			return clusterPrint(g, c.Context(), *addr, cluster.GroupsAddPath, body, func(raw []byte) error {
				var doc cluster.GroupsAdded
				if err := json.Unmarshal(raw, &doc); err != nil {
					return fmt.Errorf("groups add: the node's answer: %w", err)
				}
				for _, gr := range doc.Groups {
					vs := make([]string, len(gr.Voters))
					for i, v := range gr.Voters {
						vs[i] = fmt.Sprint(v)
					}
					if _, err := fmt.Fprintf(g.IO().Out, "group %d added, on nodes %s\n", gr.Group, strings.Join(vs, ",")); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	add.Flags().IntVar(&count, "count", 1, "how many data groups to add (1 to 64)")
	groups.AddCommand(add)
	return groups
}
