package cli

// tally cluster status|members|groups: a cluster node's view, over its
// HTTP address.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/cluster"
)

func newCluster(g *global) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "cluster",
		Short: "A cluster node's view of the cluster: status, members, groups",
		// These verbs always ask a node, so TALLY_URL is theirs to use.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
	}
	c.PersistentFlags().StringVar(&addr, "node", "", "the node's --addr (default: $TALLY_URL, else 127.0.0.1:7420)")
	view := func(use, short string, print func(g *global, st cluster.Status) error) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				raw, st, err := g.clusterStatus(c.Context(), addr)
				if err != nil {
					return err
				}
				if g.json {
					_, err := g.io.Out.Write(raw)
					return err
				}
				return print(g, st)
			},
		}
	}
	c.AddCommand(
		view("status", "The cluster id, this node, its members and the failures the placement tolerates", printClusterStatus),
		view("members", "The members: id, raft and API addresses, zone", printClusterMembers),
		view("groups", "Each group: leader, term, commit and applied index, voters and learners", printClusterGroups),
	)
	return c
}

// clusterStatus asks the node for its status document.
func (g *global) clusterStatus(ctx context.Context, addr string) ([]byte, cluster.Status, error) {
	if addr == "" {
		addr = g.remoteURL()
	}
	if addr == "" {
		addr = "127.0.0.1:7420"
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(addr, "/")+cluster.StatusPath, nil)
	if err != nil {
		return nil, cluster.Status{}, usagef("node: %v", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, cluster.Status{}, fmt.Errorf("cluster status: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, cluster.Status{}, fmt.Errorf("cluster status: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, cluster.Status{}, fmt.Errorf("cluster status: %s answered %s: %s", addr, resp.Status, strings.TrimSpace(string(raw)))
	}
	var st cluster.Status
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, cluster.Status{}, fmt.Errorf("cluster status: %s is not a cluster node: %w", addr, err)
	}
	return raw, st, nil
}

func printClusterStatus(g *global, st cluster.Status) error {
	w := g.io.Out
	fmt.Fprintf(w, "cluster %s, seen from node %d\n", st.ClusterID, st.NodeID)
	if st.Failed != "" {
		fmt.Fprintf(w, "this node has STOPPED: %s\n", st.Failed)
	}
	leaders := map[uint64]int{}
	noLeader := 0
	for _, gr := range st.Groups {
		if gr.Leader == 0 {
			noLeader++
		}
		leaders[gr.Leader]++
	}
	fmt.Fprintf(w, "%d members, %d groups", len(st.Members), len(st.Groups))
	if noLeader > 0 {
		fmt.Fprintf(w, ", %d without a leader", noLeader)
	}
	fmt.Fprintln(w)
	for _, m := range st.Members {
		fmt.Fprintf(w, "  node %d leads %d group(s)\n", m.ID, leaders[m.ID])
	}
	fmt.Fprintln(w, st.Tolerates.Summary)
	return nil
}

func printClusterMembers(g *global, st cluster.Status) error {
	t := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "ID\tRAFT\tADDR\tZONE")
	for _, m := range st.Members {
		fmt.Fprintf(t, "%d\t%s\t%s\t%s\n", m.ID, m.RaftAddr, m.Addr, m.Zone)
	}
	return t.Flush()
}

func printClusterGroups(g *global, st cluster.Status) error {
	t := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "GROUP\tKIND\tLEADER\tTERM\tCOMMIT\tAPPLIED\tVOTERS\tLEARNERS")
	ids := func(v []uint64) string {
		s := make([]string, len(v))
		for i, id := range v {
			s[i] = fmt.Sprint(id)
		}
		if len(s) == 0 {
			return "-"
		}
		return strings.Join(s, ",")
	}
	for _, gr := range st.Groups {
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", gr.Group, gr.Kind, gr.Leader, gr.Term, gr.Commit, gr.Applied, ids(gr.Voters), ids(gr.Learners))
	}
	return t.Flush()
}
