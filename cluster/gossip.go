package cluster

// The failure detector at a node: memberlist (SWIM with Lifeguard: the
// probes, the up to 3 indirect probes, its own suspicion and refutation,
// the dissemination, the keyring) configured to the seed, and tally's own
// layer on top of it (cluster/liveness: per-peer probe deadlines from
// Vivaldi coordinates, the health score 0–8, the late-homework grants, and
// the deciding table at the meta group's leader, which commits settled
// facts). docs/CLUSTER.md "Liveness" says which rule lives where.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"

	"tally/cluster/internal/fault"
	"tally/cluster/liveness"
	"tally/cluster/replica"
)

// GossipAddr is the failure detector's address (UDP and TCP) of a node
// started without --gossip-addr: its raft address's host, the next port.
func GossipAddr(raftAddr string) string {
	host, port, err := net.SplitHostPort(raftAddr)
	if err != nil {
		return ""
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return ""
	}
	if p >= 65535 {
		return net.JoinHostPort(host, strconv.Itoa(p-1))
	}
	return net.JoinHostPort(host, strconv.Itoa(p+1))
}

// gossipAddrOf is a member's gossip address: recorded, else derived.
func gossipAddrOf(m replica.Member) string {
	if m.GossipAddr != "" {
		return m.GossipAddr
	}
	return GossipAddr(m.RaftAddr)
}

// gossipTick is how often the layer looks at its timers (late ticks,
// suspicions' deadlines); its own probes and reports go once a probe
// period.
const gossipTick = liveness.ProbePeriod / 5

// gossipInboxMax bounds the messages waiting for the layer's loop; past it
// they are dropped (a report comes again the next period).
const gossipInboxMax = 256

// gossipKey is memberlist's AES-256 key: the join secret's, bound to the
// cluster, so a stranger without the secret can neither join nor accuse,
// and another cluster with the same secret does not mix with this one.
func gossipKey(secret, clusterID string) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(h, "tally gossip key v1\n%s\n", clusterID)
	return h.Sum(nil)
}

// gossipStats are the layer's counters (metrics).
type gossipStats struct {
	probes, indirect, mlSuspicions, suspicions, refutations, grants, deaths, late, sentBytes atomic.Uint64
	denials                                                                                  [8]atomic.Uint64 // by liveness.Denials' order
}

// peerView is what this node learnt of another: its coordinate and health
// from its acks, its incarnation from its gossip, this node's own probe.
type peerView struct {
	coord       *coordinate.Coordinate
	health      int
	inc         uint64
	rtt         time.Duration
	seen        bool // in memberlist's list once
	probeNonce  uint64
	probeSent   time.Time
	probeDue    time.Time
	probeAnswer bool
	accused     bool // its last probe here went unanswered
	// mlSuspectAt is when memberlist last said it failed its probes here.
	mlSuspectAt time.Time
}

// mlSuspectFor is how long memberlist's word that a member failed its
// probes holds, unless an acknowledged probe clears it sooner: memberlist
// says it again at each failed probe (every member is probed within n
// periods).
const mlSuspectFor = 3 * liveness.ProbePeriod

// gossip is the node's failure detector.
type gossip struct {
	c     *Node
	log   *slog.Logger
	ml    *memberlist.Memberlist
	viv   *liveness.Vivaldi
	inbox chan []byte
	stats gossipStats
	// memLimit is the memory limit the node's load is measured against (0:
	// unknown).
	memLimit uint64
	// faults are the node's fault-injection switches (tests only).
	faults fault.Node

	mu      sync.Mutex
	inc     uint64
	health  liveness.Health
	witness uint64
	loopOK  bool // a turn of the control loop ran since the round asked for one
	leader  uint64
	// heard is the leader that last answered this node, and when: where
	// its reports go while raft names no leader (a node removed from the
	// meta group while it was settled dead hears from no leader there).
	heard   uint64
	heardAt time.Time
	peers   map[uint64]*peerView
	table   map[uint64]verdictRow // the leader's, as last answered
	last    answer                // the leader's last answer to this node

	// Only the layer's loop touches these.
	det *liveness.Detector
	// seq numbers this node's reports; lastHeard is each reporter's last
	// report heard, as incarnation and seq.
	seq       uint64
	lastHeard map[uint64][2]uint64
	// relay rotates over the members a report also goes to while no
	// leader answers, any of which passes it to the leader it knows.
	relay     int
	pending   map[uint64]bool // facts being committed, by node
	nonce     uint64
	joined    bool
	wg        sync.WaitGroup
	incPath   string
	lastTick  time.Time
	lastRound time.Time
}

// incarnationFile holds the node's incarnation, raised at every start and
// every refutation, so it never goes backwards.
const incarnationFile = "liveness.json"

func (c *Node) startGossip() (*gossip, error) {
	g := &gossip{c: c, log: c.log.With("layer", "liveness"), viv: liveness.NewVivaldi(), inbox: make(chan []byte, gossipInboxMax),
		peers: map[uint64]*peerView{}, table: map[uint64]verdictRow{}, pending: map[uint64]bool{}, lastHeard: map[uint64][2]uint64{}, incPath: filepath.Join(c.cfg.Data, incarnationFile)}
	g.faults = fault.FromEnv()
	if g.faults.FreezeControlLoop {
		g.log.Warn("fault injected: the control loop's turns are not counted, so this node's witness never advances", "env", fault.FreezeControlLoopEnv)
	}
	if g.faults.MuteReports {
		g.log.Warn("fault injected: this node's reports to the deciding table are dropped", "env", fault.MuteReportsEnv)
	}
	g.memLimit = c.cfg.MemoryLimit
	if g.memLimit == 0 {
		g.memLimit = memoryLimit()
	}
	var st struct {
		Incarnation uint64 `json:"incarnation"`
	}
	if b, err := os.ReadFile(g.incPath); err == nil {
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("liveness: %s: %w", g.incPath, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("liveness: %w", err)
	}
	// Above any incarnation it used (kept) or was recorded at (a fact its
	// replica of the meta group applied), kept before it gossips: a node
	// restarting after it was settled dead speaks at once above its death.
	g.inc = st.Incarnation
	if f, ok := c.sm.Liveness(c.cfg.NodeID); ok && f.Incarnation > g.inc {
		g.inc = f.Incarnation
	}
	if err := g.raise(); err != nil {
		return nil, err
	}
	addr := c.cfg.GossipAddr
	if addr == "" {
		addr = GossipAddr(c.cfg.RaftAddr)
	}
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gossip-addr: %q: %w", addr, err)
	}
	mc := memberlist.DefaultLANConfig()
	mc.Name = strconv.FormatUint(c.cfg.NodeID, 10)
	mc.BindAddr, mc.BindPort = ta.IP.String(), ta.Port
	mc.AdvertiseAddr, mc.AdvertisePort = ta.IP.String(), ta.Port
	// The seed's numbers: a probe a period, up to 3 indirect probes, the
	// observer's stretch bounded to 3×; suspicion from 3 periods (scaled
	// by the members' log) to 6 times that. memberlist's probe timeout is
	// one value for every peer: the floor of the clamp; the per-peer
	// deadlines are this layer's (probe).
	mc.ProbeInterval = liveness.ProbePeriod
	mc.ProbeTimeout = liveness.ProbeDeadlineMin
	mc.IndirectChecks = liveness.IndirectProbes
	mc.AwarenessMaxMultiplier = 3
	mc.SuspicionMult = liveness.SuspicionMult
	mc.SuspicionMaxTimeoutMult = liveness.SuspicionMaxMult
	mc.SecretKey = gossipKey(c.cfg.Secret, c.id.ClusterID)
	mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	mc.Label = "tally"
	mc.Delegate = gossipDelegate{g}
	mc.Ping = gossipPinger{g}
	mc.LogOutput = &memberlistLog{g: g}
	mc.Logger = log.New(mc.LogOutput, "", 0)
	mc.LogOutput = nil
	nt, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger})
	if err != nil {
		return nil, fmt.Errorf("gossip-addr: %s: %w", addr, err)
	}
	mc.Transport = countingTransport{nt, &g.stats.sentBytes}
	if g.ml, err = memberlist.Create(mc); err != nil {
		_ = nt.Shutdown()
		return nil, fmt.Errorf("gossip-addr: %s: %w", addr, err)
	}
	return g, nil
}

// raise raises the node's incarnation and keeps it before it is used.
func (g *gossip) raise() error {
	g.mu.Lock()
	g.inc++
	inc := g.inc
	g.mu.Unlock()
	b, _ := json.Marshal(map[string]uint64{"incarnation": inc})
	tmp := g.incPath + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	if err := os.Rename(tmp, g.incPath); err != nil {
		return fmt.Errorf("liveness: %w", err)
	}
	return nil
}

func (g *gossip) close() error {
	g.wg.Wait()
	if g.ml == nil {
		return nil
	}
	return g.ml.Shutdown()
}

// run is the layer's loop, until ctx ends.
func (g *gossip) run(ctx context.Context) {
	t := time.NewTicker(gossipTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case b := <-g.inbox:
			g.handle(ctx, b, time.Now())
		case now := <-t.C:
			g.tick(ctx, now)
		}
	}
}

func (g *gossip) tick(ctx context.Context, now time.Time) {
	if !g.lastTick.IsZero() && liveness.LateTick(g.lastTick, now, gossipTick) {
		// The node itself did not run on time: its timeouts stretch, and
		// the suspicions it holds wait for what it could not hear.
		g.stats.late.Add(1)
		g.mu.Lock()
		g.health = g.health.Late()
		g.mu.Unlock()
		if g.det != nil {
			g.det.Stalled(now.Sub(g.lastTick) - gossipTick)
		}
	}
	g.lastTick = now
	if g.det != nil {
		for _, v := range g.det.Expire(now) {
			g.commitDeath(ctx, v.Node, v.Incarnation)
		}
	}
	if now.Sub(g.lastRound) >= liveness.ProbePeriod {
		g.lastRound = now
		g.round(ctx, now)
		return
	}
	// Between rounds, this node's own probes go on at every tick, and a
	// member newly accused is reported at once.
	if suspects, fresh := g.probe(g.members(), now); fresh {
		g.report(ctx, suspects, now)
	}
}

// round is the layer's once-a-period work: count a tick of the control
// loop (the witness), learn the meta group's leader, join memberlist if
// alone, probe the peers memberlist suspects with this node's own
// deadlines, and report to the leader.
func (g *gossip) round(ctx context.Context, now time.Time) {
	g.controlTick(ctx)
	members := g.members()
	ids := make([]uint64, len(members))
	for i, m := range members {
		ids[i] = m.ID
	}
	self := g.c.cfg.NodeID
	g.mu.Lock()
	leader, health, inc := g.leader, g.health, g.inc
	g.mu.Unlock()
	g.join(members)
	// Settled dead at this incarnation (seen before any leader's answer:
	// this node may still believe it leads), it refutes.
	if f, found := g.c.sm.Liveness(self); found && f.State == replica.LivenessDead && f.Incarnation >= inc {
		g.refute(ctx, liveness.Dead, "settled dead", f.Incarnation, now)
	}
	// The deciding table lives at the meta group's leader. It is dropped
	// only when another node leads: not for a turn of the loop that came
	// late, nor while an election names no leader, since a table started
	// over starts every suspicion over, and on a busy machine a death
	// would never be settled.
	switch {
	case leader == self && g.det == nil:
		g.det = liveness.NewDetector(self, liveness.ProbePeriod)
		g.log.Info("deciding liveness: this node leads the meta group")
	case leader != self && leader != 0 && g.det != nil:
		g.det = nil
		g.log.Info("no longer deciding liveness", "leader", leader)
	}
	if g.det != nil {
		g.det.Members(ids)
		// Facts another decider or an operator committed meanwhile: a
		// settle only moves the table forward, never clears a suspicion.
		for _, f := range g.c.sm.LivenessFacts() {
			g.det.Settle(f.Node, f.Incarnation, liveness.State(f.State))
		}
		g.det.SetHealth(health)
		g.resettle(ctx)
	}
	suspects, _ := g.probe(members, now)
	g.report(ctx, suspects, now)
}
