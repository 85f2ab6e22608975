package servecli

// tally cluster configure --replicas N: the replication factor, recorded
// in the meta group through a node, signed with the join secret; and
// --custody all|majority, the copies of an artifact's bytes a check waits
// for (cluster.CustodyPolicyPath).

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/placement"
	"tally/cluster/replica"
)

// configureOptions are tally cluster configure's.
type configureOptions struct {
	addr     *string
	secret   func() (string, error)
	replicas int
	given    bool
	custody  string
}

func newClusterConfigure(g cli.Env, addr *string, secret func() (string, error)) *cobra.Command {
	o := &configureOptions{addr: addr, secret: secret}
	c := &cobra.Command{
		Use:   "configure --replicas N | --custody all|majority",
		Short: "Set the replication factor: each data group's voters (odd); the placement driver brings every group to it. Or the custody policy: the voters holding an artifact's bytes before a check on it begins",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o.given = c.Flags().Changed("replicas")
			return runConfigure(c.Context(), g, o)
		},
	}
	c.Flags().IntVar(&o.replicas, "replicas", 0, "the replication factor: 1, 3, 5, …")
	c.Flags().StringVar(&o.custody, "custody", "", "the custody policy: all (every voter of a group holds a verified copy before a check begins; the default) or majority (more than half)")
	return c
}

func runConfigure(ctx context.Context, g cli.Env, o *configureOptions) error {
	if o.custody != "" && !o.given {
		return runConfigureCustody(ctx, g, o)
	}
	if !o.given {
		return cli.Usagef("replicas: required: the replication factor (1, 3, 5, …), or --custody all|majority")
	}
	if o.custody != "" {
		return cli.Usagef("custody: give --replicas and --custody in two commands")
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

// runConfigureCustody sets the custody policy.
func runConfigureCustody(ctx context.Context, g cli.Env, o *configureOptions) error {
	if err := replica.CheckCustodyPolicy(o.custody); err != nil {
		return cli.Usagef("%v", err)
	}
	s, err := o.secret()
	if err != nil {
		return err
	}
	body := func(t cluster.Target) any {
		return cluster.Sign(s, t, cluster.CustodyRequest{Custody: o.custody})
	}
	return clusterPrint(g, ctx, *o.addr, cluster.CustodyPolicyPath, body, func(raw []byte) error {
		var a cluster.CustodySet
		if err := json.Unmarshal(raw, &a); err != nil {
			return fmt.Errorf("configure: the node's answer: %w", err)
		}
		_, err := fmt.Fprintf(g.IO().Out, "custody %s (was %s): %s\n", a.Custody, a.Was, custodyMeaning(a.Custody))
		return err
	})
}

// custodyMeaning says what a custody policy requires.
func custodyMeaning(policy string) string {
	if policy == replica.CustodyMajority {
		return "a check begins once more than half the voters of its artifact's group hold a verified copy"
	}
	return "a check begins once every voter of its artifact's group holds a verified copy"
}
