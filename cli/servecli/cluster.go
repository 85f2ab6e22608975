package servecli

// tally cluster status|members|groups|placements: a cluster node's view,
// over its HTTP address; and the operator's changes, signed with the join
// secret.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"tally/cli"
	"tally/cluster"
	"tally/cluster/replica"
)

func newCluster(g cli.Env) *cobra.Command {
	var addr string
	c := &cobra.Command{
		Use:   "cluster",
		Short: cli.HostedShort("cluster"),
		// These verbs always ask a node, so TALLY_URL is theirs to use.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
	}
	c.PersistentFlags().StringVar(&addr, "node", "", "the node's --addr (default: $TALLY_URL, else 127.0.0.1:7420)")
	view := func(use, short string, print func(g cli.Env, st cluster.Status) error) *cobra.Command {
		return &cobra.Command{
			Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				raw, st, err := clusterStatus(g, c.Context(), addr)
				if err != nil {
					return err
				}
				if g.JSON() {
					_, err := g.IO().Out.Write(raw)
					return err
				}
				return print(g, st)
			},
		}
	}
	var secret string
	c.PersistentFlags().StringVar(&secret, "join-secret", "", "the cluster's join secret, which signs the operator's requests (default: $TALLY_JOIN_SECRET)")
	secretOf := func() (string, error) { return joinSecret(g, secret) }
	// signedNode is the secret to sign with and the node id arg names.
	signedNode := func(arg string) (string, uint64, error) {
		s, err := secretOf()
		if err != nil {
			return "", 0, err
		}
		id, err := strconv.ParseUint(arg, 10, 64)
		if err != nil || id == 0 {
			return "", 0, cli.Usagef("node: %q is not a node id", arg)
		}
		return s, id, nil
	}
	var group, to uint64
	transfer := &cobra.Command{
		Use: "transfer-leader --group G --to N", Short: "Hand a group's leadership to one of its voters (asked at its leader; waits until it has moved)", Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			s, err := secretOf()
			if err != nil {
				return err
			}
			if group == 0 || to == 0 {
				return cli.Usagef("group, to: both required")
			}
			body := func(t cluster.Target) any {
				return cluster.Sign(s, t, cluster.TransferRequest{Group: group, To: to})
			}
			return clusterPost(g, c.Context(), addr, cluster.TransferLeaderPath, body, fmt.Sprintf("group %d is led by node %d", group, to))
		},
	}
	transfer.Flags().Uint64Var(&group, "group", 0, "the group (see tally cluster groups)")
	transfer.Flags().Uint64Var(&to, "to", 0, "the voter to lead it")
	remove := &cobra.Command{
		Use: "remove-node N", Short: "Remove a node from the cluster and from every group (refused if a group would lose its quorum)", Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, id, err := signedNode(args[0])
			if err != nil {
				return err
			}
			body := func(t cluster.Target) any { return cluster.Sign(s, t, cluster.RemoveRequest{ID: id}) }
			return clusterPost(g, c.Context(), addr, cluster.RemoveNodePath, body, fmt.Sprintf("node %d removed; each group's leader takes it out", id))
		},
	}
	var raftAddr, apiAddr, zone, region, gossipAddr string
	add := &cobra.Command{
		Use:   "add-node N --raft-addr HOST:PORT --addr HOST:PORT [--zone Z] [--region R] [--gossip-addr HOST:PORT]",
		Short: "Record a node in the membership before it starts (its id and addresses reserved; each group adds it as a learner); then start it with serve --cluster --join",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s, id, err := signedNode(args[0])
			if err != nil {
				return err
			}
			if raftAddr == "" || apiAddr == "" {
				return cli.Usagef("raft-addr, addr: both required, as the node will be started with")
			}
			m := replica.Member{ID: id, RaftAddr: raftAddr, Addr: apiAddr, Zone: zone, Region: region}
			if gossipAddr != cluster.GossipAddr(raftAddr) {
				m.GossipAddr = gossipAddr // as serve records it: the default is derived
			}
			if err := cluster.CheckMember(m, ""); err != nil {
				return cli.Usagef("%s", strings.NewReplacer("raft_addr", "raft-addr", "gossip_addr", "gossip-addr").Replace(err.Error()))
			}
			body := func(t cluster.Target) any { return cluster.Sign(s, t, cluster.AddRequest{Member: m}) }
			return clusterPost(g, c.Context(), addr, cluster.AddNodePath, body,
				fmt.Sprintf("node %d added; start it: tally serve --cluster --node-id %d --raft-addr %s --addr %s%s --data DIR --join-secret … --join %s",
					id, id, raftAddr, apiAddr, map[bool]string{true: "", false: " --zone " + zone}[zone == ""]+map[bool]string{true: "", false: " --region " + region}[region == ""]+map[bool]string{true: "", false: " --gossip-addr " + gossipAddr}[m.GossipAddr == ""], strings.TrimPrefix(nodeURL(g, addr), "http://")))
		},
	}
	add.Flags().StringVar(&raftAddr, "raft-addr", "", "the node's --raft-addr, where its peers will reach it")
	add.Flags().StringVar(&apiAddr, "addr", "", "the node's --addr, its API")
	add.Flags().StringVar(&zone, "zone", "", "the node's --zone")
	add.Flags().StringVar(&region, "region", "", "the node's --region")
	add.Flags().StringVar(&gossipAddr, "gossip-addr", "", "the node's --gossip-addr, if it is given one")
	c.AddCommand(newClusterHeal(g, &addr, signedNode)...)
	c.AddCommand(transfer, add, remove, newClusterPlace(g, &addr, secretOf), newClusterPlacements(g, &addr, secretOf),
		newClusterMove(g, &addr, secretOf), newClusterMoves(g, &addr, secretOf),
		newClusterConfigure(g, &addr, secretOf),
		newClusterConstrain(g, &addr, secretOf),
		view("decisions", "The placement driver's recent decisions: each group change, why, and what became of it", printClusterDecisions),
		view("status", "The cluster id, this node, its members and the failures the placement tolerates", printClusterStatus),
		newClusterMembers(g, &addr),
		withGroupsAdd(view("groups", "Each group: leader, term, commit and applied index, voters and learners, its goal, placement epoch and the change in flight", printClusterGroups), g, &addr, secretOf),
	)
	return c
}

// joinSecret is the join secret an operator's request is signed with:
// given, else TALLY_JOIN_SECRET.
func joinSecret(g cli.Env, given string) (string, error) {
	if given == "" {
		given = g.IO().Getenv("TALLY_JOIN_SECRET")
	}
	if given == "" {
		return "", cli.Usagef("join-secret: required (or TALLY_JOIN_SECRET) to sign the request")
	}
	return given, nil
}

// nodeURL is the node a cluster verb asks.
func nodeURL(g cli.Env, addr string) string {
	if addr == "" {
		addr = g.RemoteURL()
	}
	if addr == "" {
		addr = "127.0.0.1:7420"
	}
	if !strings.Contains(addr, "://") {
		addr = "http://" + addr
	}
	return strings.TrimRight(addr, "/")
}

// clusterPost posts an operator's request and prints the node's answer
// (--json) or done.
func clusterPost(g cli.Env, ctx context.Context, addr, path string, body func(cluster.Target) any, done string) error {
	return clusterPrint(g, ctx, addr, path, body, func([]byte) error {
		_, err := fmt.Fprintln(g.IO().Out, done)
		return err
	})
}

// clusterPrint posts an operator's request and prints the node's answer:
// as it came with --json, else through human.
func clusterPrint(g cli.Env, ctx context.Context, addr, path string, body func(cluster.Target) any, human func(raw []byte) error) error {
	raw, err := clusterCall(g, ctx, addr, path, body)
	if err != nil {
		return err
	}
	if g.JSON() {
		_, err := g.IO().Out.Write(raw)
		return err
	}
	return human(raw)
}

// clusterCall posts an operator's request, signed by body for the node
// it asks (its cluster and id, asked first: cluster.ReadTarget), and
// returns the node's answer; a node that is not the group's leader answers
// with the leader's address, where it is signed and posted once more. A
// 400 is a usage error.
func clusterCall(g cli.Env, ctx context.Context, addr, path string, body func(cluster.Target) any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	url := nodeURL(g, addr)
	for hop := 0; ; hop++ {
		to, err := cluster.ReadTarget(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		b, _ := json.Marshal(body(to))
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
		if err != nil {
			return nil, cli.Usagef("node: %v", err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return raw, nil
		}
		var ref struct {
			Error      string `json:"error"`
			LeaderAddr string `json:"leader_addr"`
		}
		_ = json.Unmarshal(raw, &ref)
		if resp.StatusCode == http.StatusServiceUnavailable && ref.LeaderAddr != "" && hop == 0 {
			url = nodeURL(g, ref.LeaderAddr)
			continue
		}
		if ref.Error == "" {
			ref.Error = strings.TrimSpace(string(raw))
		}
		if resp.StatusCode == http.StatusBadRequest {
			return nil, cli.Usagef("%s", ref.Error)
		}
		if resp.StatusCode == http.StatusServiceUnavailable {
			return nil, unavailableError{ref.Error}
		}
		return nil, errors.New(ref.Error)
	}
}

// unavailableError is a node's 503: it could not take the request now (no
// leader, a group unavailable there).
type unavailableError struct{ msg string }

func (e unavailableError) Error() string { return e.msg }

// clusterStatus asks the node for its status document.
func clusterStatus(g cli.Env, ctx context.Context, addr string) ([]byte, cluster.Status, error) {
	var st cluster.Status
	raw, err := clusterGet(g, ctx, addr, cluster.StatusPath, "cluster status", &st)
	return raw, st, err
}

// clusterGet asks the node for one of its documents (what names it in
// errors) and decodes it into doc; a node with tokens shows it to an admin
// of every tenant.
func clusterGet(g cli.Env, ctx context.Context, addr, path, what string, doc any) ([]byte, error) {
	addr = nodeURL(g, addr)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, addr+path, nil)
	if err != nil {
		return nil, cli.Usagef("node: %v", err)
	}
	if tok := g.IO().Getenv("TALLY_TOKEN"); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s answered %s: %s", what, addr, resp.Status, strings.TrimSpace(string(raw)))
	}
	if err := json.Unmarshal(raw, doc); err != nil {
		return nil, fmt.Errorf("%s: %s is not a cluster node: %w", what, addr, err)
	}
	return raw, nil
}

func printClusterStatus(g cli.Env, st cluster.Status) error {
	w := g.IO().Out
	fmt.Fprintf(w, "cluster %s, seen from node %d\n", st.ClusterID, st.NodeID)
	if r := st.Restored; r != nil {
		from := "a ledger directory"
		if r.ClusterID != "" {
			from = "cluster " + r.ClusterID
		}
		fmt.Fprintf(w, "restored from a backup of %s taken %s: a new incarnation, without writes acknowledged there after it\n", from, r.Created.Format(time.RFC3339))
	}
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
	noQuorum := 0
	for _, gr := range st.Groups {
		if !gr.Quorum {
			noQuorum++
		}
	}
	fmt.Fprintf(w, "%d members, %d groups", len(st.Members), len(st.Groups))
	if noLeader > 0 {
		fmt.Fprintf(w, ", %d without a leader", noLeader)
	}
	if noQuorum > 0 {
		fmt.Fprintf(w, ", %d this node cannot reach a quorum of", noQuorum)
	}
	fmt.Fprintln(w)
	for _, m := range st.Members {
		fmt.Fprintf(w, "  node %d leads %d group(s)\n", m.ID, leaders[m.ID])
	}
	fmt.Fprintln(w, st.Tolerates.Summary)
	if st.Placements > 0 {
		fmt.Fprintf(w, "%d session(s) placed by the directory (tally cluster placements lists them)\n", st.Placements)
	}
	for _, mv := range st.Moves {
		if !mv.Ended() {
			fmt.Fprintf(w, "moving %s from group %d to group %d: %s (move %d)\n", mv.Name(), mv.From, mv.To, mv.Step, mv.ID)
		}
	}
	if st.Custody != "" {
		fmt.Fprintf(w, "custody: %s: %s\n", st.Custody, custodyMeaning(st.Custody))
	}
	return printPlacement(g, st)
}

func refIDs(refs []cluster.NodeRef) []uint64 {
	out := make([]uint64, len(refs))
	for i, r := range refs {
		out[i] = r.ID
	}
	return out
}

func printClusterGroups(g cli.Env, st cluster.Status) error {
	t := tabwriter.NewWriter(g.IO().Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(t, "GROUP\tKIND\tLEADER\tTERM\tCOMMIT\tAPPLIED\tVOTERS\tLEARNERS\tQUORUM\tGOAL\tEPOCH\tMOVING")
	placed := map[uint64]cluster.GroupPlacement{}
	for _, gp := range st.Placement.Groups {
		placed[gp.Group] = gp
	}
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
		quorum := "yes"
		if !gr.Quorum {
			quorum = "NO"
		}
		gp := placed[gr.Group]
		voters, learners := ids(gr.Voters), ids(gr.Learners)
		if gp.Recorded {
			// The configuration the group's leader recorded: this node's
			// raft view is stale for a group it does not hold.
			voters, learners = ids(refIDs(gp.Voters)), ids(refIDs(gp.Learners))
		}
		moving := "-"
		if d := gp.InFlight; d != nil {
			moving = fmt.Sprintf("%s node %d", d.Op, d.Node)
		}
		fmt.Fprintf(t, "%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", gr.Group, gr.Kind, gr.Leader, gr.Term, gr.Commit, gr.Applied, voters, learners, quorum, gp.Goal, gp.Epoch, moving)
	}
	return t.Flush()
}
