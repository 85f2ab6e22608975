// Package cluster is tally's clustered Service: a node hosting the meta
// group and the data groups on raft (cluster/node), over one raft store
// (cluster/raftlog) and one transport (cluster/transport), whose replicated
// state machine (cluster/replica) runs every command on this node's own
// session ledgers. A write is proposed as a command fixed by this node (the
// instant, the ids' seed), committed by a quorum, applied here like
// everywhere, and answered with what this replica's Service returned; raft
// forwards a follower's proposal to the leader. A read waits for a
// quorum-confirmed read index (ReadIndex) and then reads this replica.
package cluster

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"tally/auth"
	"tally/cluster/node"
	"tally/cluster/placement"
	"tally/cluster/raftlog"
	"tally/cluster/replica"
	"tally/cluster/transport"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/service"
)

// Config configures a node.
type Config struct {
	NodeID uint64
	// RaftAddr is where the node listens for its peers (and what they are
	// told); Addr is its HTTP address (the API, and where joins go).
	RaftAddr, Addr string
	// GossipAddr is where the node's failure detector listens, UDP and
	// TCP; empty, GossipAddr(RaftAddr).
	GossipAddr string
	// Zone and Region are the node's failure domains, as its operator
	// declares them; placement spreads each group's voters over regions,
	// then zones.
	Zone, Region string
	// Data is the node's directory: raft/ (the raft store), ledger/ (its
	// replicas' session logs, a ledger directory), snapshots/ (snapshot
	// bodies received and not yet installed) and cluster.json.
	Data string
	// Secret is the join secret every node is given.
	Secret string
	// Bootstrap makes a new cluster with this node as its first member;
	// Join names a member's Addr to join through. Neither is needed to
	// restart a node that has its data.
	Bootstrap bool
	Join      string
	// Groups is the number of data groups (fixed at bootstrap).
	Groups int
	// Replicas is the replication factor a bootstrap records: each data
	// group's voters (odd). Later changed by configure (OpConfigure),
	// never by a restart. 0 records none: every member is a voter of
	// every group, as before the factor existed, until configured (serve
	// gives DefaultReplicas unless told).
	Replicas int
	// Tick is raft's tick; elections take 10 ticks.
	Tick time.Duration
	// WatchEvery is how often the leader of each group looks for due
	// expectations and proposes their lapses; 0 turns it off.
	WatchEvery time.Duration
	// Ledger configures the replicas' session ledgers.
	Ledger ledger.Config
	// MemoryLimit is the memory the node may use, against which it reports
	// itself overloaded (liveness.MemoryShareMax); 0, GOMEMLIMIT's or the
	// cgroup's.
	MemoryLimit uint64
	// Version is the tally release the node runs, written into the backups
	// it streams.
	Version string
	// Local makes the Service over the replica's sessions from the
	// ledgerservice.Config the node fixes: Now, the instant of the command being
	// applied; Root, the replica's ledger directory; TargetsVerified, as a
	// check's target is verified at the proposer, never by a replica. It
	// adds what the node leaves open (Timekeeper, RelativeLogs) and keeps
	// the rest.
	Local func(sessions ledgerservice.Sessions, cfg ledgerservice.Config) service.Service
	// OnFirstToken is given the cluster's first admin token (an admin of
	// every tenant's tokens) when the bootstrapping node mints it: the
	// only time its secret is shown.
	OnFirstToken func(secret string, tok auth.Token)
	Logger       *slog.Logger
	// MaxUploadBytes bounds the bytes of one artifact or evidence sent to
	// the node, streamed into its content store (serve
	// --max-artifact-bytes); 0 is DefaultMaxUploadBytes.
	MaxUploadBytes int64
	// NoSpread keeps the driver from moving sessions between data groups
	// on its own (serve --spread=false): an operator's moves only, for a
	// cluster whose placement of sessions is planned by hand.
	NoSpread bool
	// storeErrors hears the raft store's background errors (Starting's,
	// so it can say why a start does not end).
	storeErrors func(error)
}

// DefaultGroups is the data groups a new cluster gets; MaxGroups the most
// it may have.
const (
	DefaultGroups = 8
	MaxGroups     = 1024
)

// Validate names what is missing or out of range.
func (c Config) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("node-id: required, not 0")
	case c.RaftAddr == "" || c.Addr == "":
		return errors.New("raft-addr, addr: required")
	case c.GossipAddr != "" && CheckHostPort(c.GossipAddr) != nil:
		return fmt.Errorf("gossip-addr: %w", CheckHostPort(c.GossipAddr))
	case c.GossipAddr == "" && GossipAddr(c.RaftAddr) == "":
		return fmt.Errorf("gossip-addr: none given, and none derives from raft-addr %q", c.RaftAddr)
	case c.Data == "":
		return errors.New("data: required")
	case len(c.Secret) < 16:
		return errors.New("join-secret: at least 16 characters")
	case c.Bootstrap && c.Join != "":
		return errors.New("bootstrap, join: give one, not both")
	case c.Groups < 1 || c.Groups > MaxGroups:
		return fmt.Errorf("groups: %d: must be 1 to %d", c.Groups, MaxGroups)
	case c.Replicas != 0 && placement.CheckReplicas(c.Replicas) != nil:
		return fmt.Errorf("replicas: %w", placement.CheckReplicas(c.Replicas))
	case c.Tick <= 0:
		return errors.New("tick: must be positive")
	case c.Local == nil:
		return errors.New("cluster config: Local is nil")
	}
	return nil
}

// Node is a running cluster node.
type Node struct {
	cfg     Config
	id      identity
	log     *slog.Logger
	db      *raftlog.DB
	sm      *replica.SM
	tr      *transport.TCP
	nd      *node.MultiRaft
	calls   chan func(*node.MultiRaft)
	metrics *metrics
	// metaSync shares one meta group read among the requests whose token
	// this node does not know yet (catchUpMeta).
	metaSync singleflight.Group
	// deliverer makes the timekeeper's delivery watchers (Deliver).
	deliverer atomic.Pointer[NewDeliverer]
	// timekeeps counts the timekeeper's passes begun: one begun proves the
	// one before it ended (the passes run one at a time).
	timekeeps atomic.Uint64
	// nonces are the signed requests' nonces this node took (signed.go).
	nonces nonces
	// gossip is the node's failure detector (gossip.go).
	gossip *gossip

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// holdReceipts, set by tests, keeps this node from committing custody
	// receipts (custody.go), as a copy still fetching would.
	holdReceipts atomic.Bool
	// custody is what the custody sweep and the fetches share (fetch.go).
	custody custodyState
	done    chan error // the loop's end
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Start opens (or creates, bootstrapping or joining) the node's data and
// runs it until Close.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	made, err := makeDir(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if _, pending, err := readPendingRestore(cfg.Data); err != nil {
		return nil, err
	} else if pending {
		// A restored backup's first start bootstraps its new cluster, by
		// the same path as --bootstrap.
		if cfg.Join != "" {
			return nil, fmt.Errorf("join: %s holds a restored backup, which starts as the first node of its own new cluster; drop --join", cfg.Data)
		}
		cfg.Bootstrap = true
	}
	id, fresh, err := establish(ctx, cfg)
	if err != nil {
		// Nothing was written (a refused join): the directories this start
		// made go, so a refused start leaves nothing behind.
		for _, d := range made {
			_ = os.Remove(d)
		}
		return nil, err
	}
	c := &Node{cfg: cfg, id: id, log: cfg.Logger.With("node", cfg.NodeID), calls: make(chan func(*node.MultiRaft), 256), done: make(chan error, 1), metrics: newMetrics()}
	c.cfg.Groups = id.Groups
	if err := c.open(fresh); err != nil {
		c.closeStores()
		return nil, err
	}
	if id.BootstrapPending {
		// Every group has its initial state: the bootstrap is done.
		id.BootstrapPending = false
		if err := writeJSONFile(filepath.Join(cfg.Data, identityName), id); err != nil {
			c.closeStores()
			return nil, fmt.Errorf("bootstrap: %w", err)
		}
		c.id = id
	}
	if id.Restored != nil && fresh {
		// Every group has its initial state: the restore is done.
		if err := restoreDone(cfg.Data); err != nil {
			c.closeStores()
			return nil, fmt.Errorf("restore: %w", err)
		}
		c.log.Info("restored cluster bootstrapped", "cluster", id.ClusterID, "from_cluster", id.Restored.ClusterID, "backup_created", id.Restored.Created, "sessions", id.Restored.Sessions)
	}
	if c.gossip, err = c.startGossip(); err != nil {
		c.closeStores()
		return nil, err
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(3)
	go func() { defer c.wg.Done(); c.gossip.run(c.ctx) }()
	go func() {
		defer c.wg.Done()
		c.done <- c.nd.Run(c.ctx, c.tr.Inbox(), c.calls)
	}()
	go func() { defer c.wg.Done(); c.reconcile(c.ctx) }()
	c.wg.Add(2)
	go func() { defer c.wg.Done(); c.keepCustody(c.ctx) }()
	go func() { defer c.wg.Done(); c.mover(c.ctx) }()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.keepGroups(c.ctx) }()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.balancer(c.ctx) }()
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.restoreGroups(c.ctx) }() // restore.go
	if cfg.WatchEvery > 0 {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.timekeep(c.ctx, cfg.WatchEvery) }()
	}
	if fresh && id.Bootstrapped {
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.announce(c.ctx) }()
	}
	if id.Bootstrapped {
		c.wg.Add(2)
		go func() { defer c.wg.Done(); c.firstAdmin(c.ctx) }()
		go func() { defer c.wg.Done(); c.firstPolicy(c.ctx) }()
	}
	return c, nil
}

// makeDir makes dir and the parents it lacks, and returns those it made,
// deepest first.
func makeDir(dir string) ([]string, error) {
	var made []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) || d == filepath.Dir(d) {
			break
		}
		made = append(made, d)
	}
	return made, os.MkdirAll(dir, 0o755)
}

func (c *Node) open(fresh bool) error {
	var err error
	if c.db, err = raftlog.Open(filepath.Join(c.cfg.Data, "raft"), raftlog.Options{Logger: c.log, FreeMin: StartFreeMin, OnBackgroundError: c.cfg.storeErrors}); err != nil {
		return err
	}
	tc := transport.DefaultConfig()
	tc.NodeID, tc.ClusterID, tc.Secret, tc.Listen = c.cfg.NodeID, c.id.ClusterID, []byte(c.cfg.Secret), c.cfg.RaftAddr
	tc.SpoolDir = filepath.Join(c.cfg.Data, "snapshots")
	if c.tr, err = transport.Listen(tc, c.log); err != nil {
		return err
	}
	for _, m := range c.id.Members {
		c.tr.AddPeer(m.ID, m.RaftAddr)
	}
	local, root := c.cfg.Local, filepath.Join(c.cfg.Data, "ledger")
	rc := replica.Config{
		Root: root, DB: c.db, Ledger: c.cfg.Ledger, Groups: c.cfg.Groups,
		Methods: c.wakeOnBytes(Methods(func() *replica.SM { return c.sm })), Logger: c.log, Fetch: c.fetchLog,
		OnMembers: func(ms []replica.Member) {
			for _, m := range ms {
				c.tr.AddPeer(m.ID, m.RaftAddr)
			}
		},
	}
	if fresh && c.id.Restored != nil {
		rc.Restored = c.id.Restored.Created
	}
	var sm *replica.SM
	rc.Service = func(s ledgerservice.Sessions) service.Service {
		return local(s, ledgerservice.Config{Now: func() time.Time { return sm.Now() }, Root: func() (string, error) { return root, nil }, TargetsVerified: true,
			MintExpectationID: func() string { return sm.MintExpectationID() }})
	}
	if sm, err = replica.New(rc); err != nil {
		return err
	}
	c.sm = sm
	for _, m := range sm.Members() {
		c.tr.AddPeer(m.ID, m.RaftAddr)
	}
	nc := node.DefaultConfig(c.cfg.NodeID)
	nc.ClusterID = c.id.ClusterID
	nc.Groups = groupIDs(c.cfg.Groups)
	nc.TickInterval = c.cfg.Tick
	peers := func(uint64) []uint64 { return nil } // joining: the leader adds us
	if fresh && c.id.Bootstrapped {
		peers = func(uint64) []uint64 { return []uint64{c.cfg.NodeID} }
	}
	c.nd, err = node.New(nc, c.db, sm, c.tr, wallClock{}, peers, c.log)
	return err
}

func groupIDs(groups int) []uint64 {
	ids := []uint64{node.MetaGroup}
	for g := 0; g < groups; g++ {
		ids = append(ids, node.MetaGroup+1+uint64(g))
	}
	return ids
}

// member is the node's member record, as it joins or announces itself.
func (c Config) member() replica.Member {
	m := replica.Member{ID: c.NodeID, RaftAddr: c.RaftAddr, Addr: c.Addr, Zone: c.Zone, Region: c.Region}
	if c.GossipAddr != GossipAddr(c.RaftAddr) {
		m.GossipAddr = c.GossipAddr // the default is derived, not recorded
	}
	return m
}

// Close stops the node: the loop, the transport, the stores.
func (c *Node) Close() error {
	c.cancel()
	c.wg.Wait()
	return c.closeStores()
}

func (c *Node) closeStores() error {
	var errs []error
	if c.gossip != nil {
		errs = append(errs, c.gossip.close())
	}
	if c.tr != nil {
		errs = append(errs, c.tr.Close())
	}
	if c.sm != nil {
		errs = append(errs, c.sm.Close())
	}
	if c.db != nil {
		errs = append(errs, c.db.Close())
	}
	return errors.Join(errs...)
}

// ID is the node's id; ClusterID the cluster's.
func (c *Node) ID() uint64        { return c.cfg.NodeID }
func (c *Node) ClusterID() string { return c.id.ClusterID }

// Replica is the node's state machine (its ledger directory, its members).
func (c *Node) Replica() *replica.SM { return c.sm }

// seed is a fresh seed for a command's ids.
func seed() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("cluster: no randomness: " + err.Error())
	}
	return binary.LittleEndian.Uint64(b[:])
}
