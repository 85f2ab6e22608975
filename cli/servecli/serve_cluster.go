package servecli

// tally serve --cluster: the server over a cluster node's Service instead
// of a ledger directory.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"tally/auth"
	"tally/cli"
	"tally/cluster"
	"tally/cluster/placement"
	"tally/ledgerservice"
	"tally/rest"
	"tally/server"
	"tally/service"
)

// clusterFlags are serve's cluster flags.
type clusterFlags struct {
	on, bootstrap        bool
	nodeID               uint64
	raftAddr, zone, data string
	region               string
	secret, join         string
	groups, replicas     int
	spread               bool
	tick                 time.Duration
	gossipAddr           string
	memoryLimit          uint64
}

func (f *clusterFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.BoolVar(&f.on, "cluster", false, "run as a node of a cluster: sessions replicated by raft groups (needs --node-id, --raft-addr, --data, --join-secret and --bootstrap or --join)")
	fl.Uint64Var(&f.nodeID, "node-id", 0, "with --cluster: this node's id, unique in the cluster, not 0")
	fl.StringVar(&f.raftAddr, "raft-addr", "", "with --cluster: HOST:PORT the node's peers reach it on")
	fl.StringVar(&f.data, "data", "", "with --cluster: the node's data directory (its raft store and its replicas' ledger)")
	fl.StringVar(&f.zone, "zone", "", "with --cluster: the node's failure zone (rack, availability zone)")
	fl.StringVar(&f.region, "region", "", "with --cluster: the node's region (a group of zones); voters spread over regions, then zones")
	fl.StringVar(&f.secret, "join-secret", "", "with --cluster: the secret every node of the cluster is given (at least 16 characters)")
	fl.BoolVar(&f.bootstrap, "bootstrap", false, "with --cluster: make a new cluster with this node as its first member")
	fl.StringVar(&f.join, "join", "", "with --cluster: join the cluster through a member's --addr")
	fl.IntVar(&f.groups, "groups", cluster.DefaultGroups, "with --cluster --bootstrap: the cluster's data groups")
	fl.BoolVar(&f.spread, "spread", true, "with --cluster: the driver spreads sessions over the data groups on its own, moving one at a time (--spread=false: only an operator's tally cluster move moves a session)")
	fl.IntVar(&f.replicas, "replicas", cluster.DefaultReplicas, "with --cluster --bootstrap: the replication factor, each data group's voters (odd: 1, 3, 5, …; later: tally cluster configure)")
	fl.DurationVar(&f.tick, "raft-tick", 100*time.Millisecond, "with --cluster: raft's tick (an election takes 10)")
	fl.StringVar(&f.gossipAddr, "gossip-addr", "", "with --cluster: HOST:PORT (UDP and TCP) of the node's failure detector (default: --raft-addr's host, its port + 1)")
	fl.Uint64Var(&f.memoryLimit, "memory-limit", 0, "with --cluster: bytes of memory the node may use; past 90% of it the node reports itself overloaded and is not granted extra time when suspected (default: GOMEMLIMIT, else the cgroup's limit)")
}

// prepare checks the cluster flags and points the server at the node's
// replica ledger directory. A data directory tally restore made gives the
// first start its node id, addresses and zone where the flags do not, and
// that start bootstraps the restored cluster.
func (f *clusterFlags) prepare(g cli.Env, c *cobra.Command, addr *string) error {
	if !f.on {
		if f.nodeID != 0 || f.raftAddr != "" || f.data != "" || f.secret != "" || f.bootstrap || f.join != "" || f.region != "" || c.Flags().Changed("replicas") || f.gossipAddr != "" || f.memoryLimit != 0 || c.Flags().Changed("spread") {
			return cli.Usagef("cluster: --node-id, --raft-addr, --gossip-addr, --memory-limit, --data, --join-secret, --bootstrap, --join, --region, --replicas and --spread need --cluster")
		}
		return nil
	}
	if err := placement.CheckReplicas(f.replicas); err != nil {
		return cli.Usagef("replicas: %v", err)
	}
	if g.Dir() != "" {
		return cli.Usagef("dir: a cluster node keeps its ledger under --data; drop --dir")
	}
	if f.data == "" {
		return cli.Usagef("data: --cluster needs --data DIR")
	}
	m, restored, err := cluster.PendingMember(g.Abs(f.data))
	if err != nil {
		return err
	}
	if restored {
		if f.join != "" {
			return cli.Usagef("join: %s holds a restored backup, which starts as the first node of its own new cluster; drop --join", f.data)
		}
		f.bootstrap = true
		given := c.Flags().Changed
		if !given("node-id") {
			f.nodeID = m.ID
		}
		if !given("raft-addr") && m.RaftAddr != "" {
			f.raftAddr = m.RaftAddr
		}
		if !given("addr") && m.Addr != "" {
			*addr = m.Addr
		}
		if !given("zone") {
			f.zone = m.Zone
		}
		if !given("region") {
			f.region = m.Region
		}
	}
	if c.Flags().Changed("replicas") && !f.bootstrap && !isNode(f.data) {
		return cli.Usagef("replicas: only with --bootstrap: the cluster's factor is recorded once; change it with tally cluster configure --replicas N")
	}
	if !f.bootstrap && f.join == "" && !isNode(f.data) {
		return cli.Usagef("bootstrap, join: a new node needs --bootstrap (the first) or --join ADDR (the others)")
	}
	g.SetDir(filepath.Join(g.Abs(f.data), "ledger"))
	return nil
}

func isNode(data string) bool {
	_, err := cluster.ReadIdentity(data)
	return err == nil
}

// serveCluster starts the node (bootstrapping or joining it when its data
// is new) and serves the API through it.
func serveCluster(g cli.Env, c *cobra.Command, cfg server.Config, f *clusterFlags) error {
	ctx, stop := signal.NotifyContext(c.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	timekeeper := cfg.Ledger.Timekeeper
	cc := cluster.Config{
		NodeID: f.nodeID, RaftAddr: f.raftAddr, GossipAddr: f.gossipAddr, MemoryLimit: f.memoryLimit, Addr: cfg.Addr, Zone: f.zone, Region: f.region, Replicas: f.replicas, Data: g.Abs(f.data), Secret: f.secret,
		Bootstrap: f.bootstrap, Join: f.join, Groups: f.groups, Tick: f.tick, WatchEvery: cfg.WatchEvery, Ledger: cfg.Ledger, Logger: cfg.Logger, Version: cli.Version,
		MaxUploadBytes: cfg.MaxArtifactBytes, NoSpread: !f.spread,
		Local: func(s ledgerservice.Sessions, lc ledgerservice.Config) service.Service {
			lc.Timekeeper, lc.RelativeLogs = timekeeper, true
			return ledgerservice.New(s, lc)
		},
		OnFirstToken: func(secret string, tok auth.Token) {
			fmt.Fprintf(g.IO().Out, "first admin token (%s, %s of every tenant's tokens; shown only now):\n%s\n", tok.ID, tok.Role, secret)
		},
	}
	if err := cc.Validate(); err != nil {
		return cli.UsageError(err)
	}
	n, err := startNode(ctx, cfg, cc)
	if err != nil {
		return err
	}
	cfg.Tokens = n
	s, err := server.NewCluster(cfg, n, n)
	if err != nil {
		return errors.Join(err, n.Close())
	}
	n.Deliver(s.Deliverer)
	for _, col := range n.Collectors() {
		if err := s.Registry().Register(col); err != nil {
			return errors.Join(err, n.Close())
		}
	}
	err = s.Serve(ctx, func(a string) {
		fmt.Fprintf(g.IO().Out, "tally node %d of cluster %s serving on http://%s (raft %s, data %s)\n", n.ID(), n.ClusterID(), a, f.raftAddr, cc.Data)
	})
	return errors.Join(err, n.Close())
}

// startNode starts the node. Until it has started (its disk full, say, it
// starts again and again, further apart), its address answers every
// request with 503 NodeStarting and why; that listener is closed once the
// node is up, and the server takes the address.
func startNode(ctx context.Context, cfg server.Config, cc cluster.Config) (*cluster.Node, error) {
	st := cluster.NewStarting(cc)
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	starting := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { rest.WriteRefusal(w, st.Refusal()) })
	hs := &http.Server{Handler: starting, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout}
	go hs.Serve(ln)
	n, err := st.Run(ctx)
	if cerr := hs.Close(); cerr != nil && err == nil {
		return nil, errors.Join(fmt.Errorf("listen: %w", cerr), n.Close())
	}
	return n, err
}
