package servecli

// tally cluster configure --replicas N: the replication factor, recorded
// in the meta group through a node, signed with the join secret.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/placement"
)

// configureOptions are tally cluster configure's.
type configureOptions struct {
	addr     *string
	secret   func() (string, error)
	replicas int
	given    bool
}

func newClusterConfigure(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	o := &configureOptions{addr: addr, secret: secret}
	c := &cobra.Command{
		Use:   "configure --replicas N",
		Short: "Set the replication factor: each data group's voters (odd); the placement driver brings every group to it",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.given = c.Flags().Changed("replicas")
			return runConfigure(c.Context(), g, o)
		},
	}
	c.Flags().IntVar(&o.replicas, "replicas", 0, "the replication factor: 1, 3, 5, …")
	return c
}

func runConfigure(ctx context.Context, g cli.Env, o *configureOptions) error {
	if !o.given {
		return cli.Usagef("replicas: required: the replication factor (1, 3, 5, …)")
	}
	if err := placement.CheckReplicas(o.replicas); err != nil {
		return cli.Usagef("replicas: %v", err)
	}
	s, err := o.secret()
	if err != nil {
		return err
	}
	body := func(t cluster.Target) any {
		return cluster.Sign(s, t, cluster.ConfigureRequest{Replicas: o.replicas})
	}
	return clusterPrint(g, ctx, *o.addr, cluster.ConfigurePath, body, func(raw []byte) error {
		var a cluster.Configured
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("configure: the node's answer: %w", err)
		}
		was := "every member a voter"
		if a.Was != 0 {
			was = fmt.Sprint(a.Was)
		}
		_, err := fmt.Fprintf(g.IO().Out, "replicas %d (was %s): each group is brought to it, one change at a time (tally cluster groups)\n", a.Replicas, was)
		return err
	})
}
