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
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"golang.org/x/sys/unix"

	"tally/cluster/internal/fault"
	"tally/cluster/liveness"
	"tally/cluster/node"
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

// Messages of tally's layer, carried as memberlist user messages (so
// under its keyring), each a type byte and a JSON body.
const (
	msgPing   byte = 'p' // a direct probe with this node's own deadline
	msgPong   byte = 'o'
	msgReport byte = 'r' // a member's report to the meta group's leader
	msgAnswer byte = 'a' // the leader's answer to a report
)

type gossipPing struct {
	From  uint64 `json:"from"`
	Nonce uint64 `json:"nonce"`
}

// accusation is a member a reporter's probes failed, at the incarnation
// the reporter knew.
type accusation struct {
	Node        uint64 `json:"node"`
	Incarnation uint64 `json:"inc"`
	// Answered: the member spoke to the cluster before (its own alive
	// message put it in the reporter's memberlist, which suspects only
	// such members), so the decider may suspect it though it never heard
	// its report: one stopped before its first report reached the decider
	// is settled dead all the same.
	Answered bool `json:"answered,omitempty"`
}

// report is a member's once-a-period report to the meta group's leader:
// its incarnation, its witness (the ticks of its control loop it counted),
// its load, its health, and the members its probes failed. While it is
// suspected, the report is its request for late homework.
type report struct {
	From        uint64          `json:"from"`
	Incarnation uint64          `json:"inc"`
	Witness     uint64          `json:"witness"`
	Health      int             `json:"health"`
	Load        liveness.Load   `json:"load"`
	Suspects    []accusation    `json:"suspects,omitempty"`
	Leader      uint64          `json:"leader"`
	Coordinate  json.RawMessage `json:"coord,omitempty"`
	// Seq numbers the reporter's reports at its incarnation, so that the
	// leader hears one once when it comes both directly and passed on.
	Seq uint64 `json:"seq"`
	// Forwarded: a member that does not decide passed it on to the leader
	// it knows (once: a forwarded report is not passed again).
	Forwarded bool `json:"fwd,omitempty"`
}

// verdictRow is one member in the leader's table, as answered.
type verdictRow struct {
	Node        uint64         `json:"node"`
	State       liveness.State `json:"state"`
	Incarnation uint64         `json:"inc"`
	GrantsUsed  int            `json:"grants"`
	Health      int            `json:"health"`
}

// answer is the leader's answer to a report: the reporter's state, the
// homework decision if it asked, and the whole table.
type answer struct {
	Leader      uint64         `json:"leader"`
	State       liveness.State `json:"state"`
	Incarnation uint64         `json:"inc"`
	Denial      string         `json:"denial,omitempty"`
	Detail      string         `json:"detail,omitempty"`
	GrantMillis int64          `json:"grant_ms,omitempty"`
	Asked       bool           `json:"asked,omitempty"`
	// Known is the incarnation the deciding table holds for the reporter:
	// above the reporter's own (its kept incarnation was lost), it must
	// speak above it to be heard at all.
	Known uint64       `json:"known,omitempty"`
	Table []verdictRow `json:"table"`
	// Notice: not an answer to a report but the leader telling a member
	// that a suspicion of it began, so that it asks for late homework at
	// once rather than at its next round (it may be stopped again by then).
	Notice bool `json:"notice,omitempty"`
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

// resettle proposes again each death the table settled that the meta
// group has not recorded: Expire settles a suspicion once, and its
// proposal can fail (a timeout on a busy machine, a leadership lost
// meanwhile, another fact of the member still in flight), which must not
// leave the member dead in the table and alive in the facts for good.
func (g *gossip) resettle(ctx context.Context) {
	for _, p := range g.det.Peers() {
		if p.State != liveness.Dead {
			continue
		}
		f, ok := g.c.sm.Liveness(p.Node)
		if ok && (f.Incarnation > p.Incarnation || f.Incarnation == p.Incarnation && f.State == replica.LivenessDead) {
			continue
		}
		g.commitDeath(ctx, p.Node, p.Incarnation)
	}
}

// commitDeath proposes the table's verdict: node dead at inc.
func (g *gossip) commitDeath(ctx context.Context, node, inc uint64) {
	g.commit(ctx, replica.LivenessFact{Node: node, Incarnation: inc, State: replica.LivenessDead, Source: replica.LivenessDetector,
		Reason: "suspected, unrefuted past its deadline, no grant left to extend it"})
}

// answerSilence is how long without an answer from a leader before a
// node's reports also go to another member, which passes them on.
const answerSilence = 3 * liveness.ProbePeriod

// report sends this node's report to the meta group's leader (or hears it
// itself, leading): the leader raft names, else the one that last
// answered. While no leader has answered for answerSilence (it names none,
// or one that no longer leads), the report also goes to the next other
// member in turn, which passes it to the leader it knows: so a node
// removed from every group while it was settled dead, which hears from no
// leader, still reaches the decider and refutes its death.
func (g *gossip) report(ctx context.Context, suspects []accusation, now time.Time) {
	self := g.c.cfg.NodeID
	g.mu.Lock()
	leader := g.leader
	if leader == 0 {
		leader = g.heard
	}
	silent := now.Sub(g.heardAt) >= answerSilence
	g.seq++
	r := report{From: self, Incarnation: g.inc, Witness: g.witness, Health: g.health.Score(), Load: g.load(), Suspects: suspects, Leader: leader, Seq: g.seq}
	g.mu.Unlock()
	if leader == self {
		g.hear(ctx, r, now)
		return
	}
	if g.faults.MuteReports {
		return
	}
	if m, ok := g.member(leader); ok && leader != 0 {
		g.send(m, msgReport, r)
	}
	if !silent {
		return
	}
	var others []replica.Member
	for _, m := range g.members() {
		if m.ID != self && m.ID != leader {
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		g.relay++
		g.send(others[g.relay%len(others)], msgReport, r)
	}
}

// members are the members as this node's replica of the meta group holds
// them, or, while it holds none yet (a node that joined, before the meta
// group took it in), as the join's answer gave them: so a new node joins
// the gossip and reaches the decider before its replica catches up.
func (g *gossip) members() []replica.Member {
	if ms := g.c.sm.Members(); len(ms) > 0 {
		return ms
	}
	return g.c.id.Members
}

// member is member id as members gives it.
func (g *gossip) member(id uint64) (replica.Member, bool) {
	if m, ok := g.c.sm.Member(id); ok {
		return m, true
	}
	i := slices.IndexFunc(g.c.id.Members, func(m replica.Member) bool { return m.ID == id })
	if i < 0 {
		return replica.Member{}, false
	}
	return g.c.id.Members[i], true
}

// relayReport passes a report this node cannot decide to the leader it
// knows, once.
func (g *gossip) relayReport(r report) {
	g.mu.Lock()
	leader := g.leader
	g.mu.Unlock()
	if r.Forwarded || leader == 0 || leader == g.c.cfg.NodeID || leader == r.From {
		return
	}
	if m, ok := g.c.sm.Member(leader); ok {
		r.Forwarded = true
		g.send(m, msgReport, r)
	}
}

// controlTick runs one turn through the node's loop (the control loop a
// witness counts) and reads the meta group's leader there. The turn is
// counted when it runs, even past the wait here: a loop that turns late
// (a node just continued, working through its backlog) still advances its
// witness, and is not taken for one that does not turn at all. loopOK says
// whether a turn ran since this one was asked for.
func (g *gossip) controlTick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, liveness.ProbePeriod/2)
	defer cancel()
	g.mu.Lock()
	g.loopOK = false
	g.mu.Unlock()
	_ = g.c.do(ctx, func(n *node.MultiRaft) {
		var leader uint64
		for _, s := range n.Status() {
			if s.Group == node.MetaGroup {
				leader = s.Leader
			}
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		g.leader = leader
		if !g.faults.FreezeControlLoop {
			g.witness++
			g.loopOK = true
		}
	})
}

// join joins memberlist through the other members while this node knows
// none of them.
func (g *gossip) join(members []replica.Member) {
	if g.ml.NumMembers() > 1 {
		g.joined = true
		return
	}
	var addrs []string
	for _, m := range members {
		if m.ID != g.c.cfg.NodeID {
			addrs = append(addrs, gossipAddrOf(m))
		}
	}
	if len(addrs) == 0 {
		return
	}
	if n, err := g.ml.Join(addrs); err != nil && n == 0 {
		g.log.Debug("gossip: join: no member answered yet", "err", err)
	}
}

// probe looks at memberlist's view of each member: one it suspects (or
// lost) gets this node's own direct probe, with the deadline its
// coordinate and this node's health give; one that missed it is accused,
// until memberlist sees it alive or it answers such a probe in time (which
// leaves the suspicion inconclusive here). It returns the accusations, and
// whether one is new.
func (g *gossip) probe(members []replica.Member, now time.Time) ([]accusation, bool) {
	self := g.c.cfg.NodeID
	state := map[uint64]*memberlist.Node{}
	for _, n := range g.ml.Members() {
		if id, err := strconv.ParseUint(n.Name, 10, 64); err == nil {
			state[id] = n
		}
	}
	var out []accusation
	fresh := false
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range members {
		if m.ID == self {
			continue
		}
		p := g.peers[m.ID]
		if p == nil {
			p = &peerView{}
			g.peers[m.ID] = p
		}
		n := state[m.ID]
		if n != nil {
			p.seen = true
			if inc, ok := metaIncarnation(n.Meta); ok && inc > p.inc {
				p.inc = inc
			}
		}
		// memberlist's own suspicion (its direct, indirect and TCP probes
		// all failed) is in its log only: its member list shows a suspect
		// as alive until it is dead.
		mlSuspect := !p.mlSuspectAt.IsZero() && now.Sub(p.mlSuspectAt) < mlSuspectFor
		failing := p.seen && (n == nil || mlSuspect)
		if !failing {
			p.probeNonce, p.accused = 0, false
			continue
		}
		if p.probeNonce != 0 && !now.Before(p.probeDue) {
			if p.probeAnswer {
				g.health = g.health.Answered()
				p.accused = false
			} else {
				g.health = g.health.Missed()
				if !p.accused {
					fresh = true
					g.log.Info("accusing: missed this node's probe", "member", m.ID, "incarnation", p.inc, "deadline", p.probeDue.Sub(p.probeSent))
				}
				p.accused = true
			}
		}
		if p.accused {
			out = append(out, accusation{Node: m.ID, Incarnation: p.inc, Answered: p.seen})
		}
		if p.probeNonce == 0 || !now.Before(p.probeDue) {
			g.nonce++
			est := g.viv.Estimate(strconv.FormatUint(m.ID, 10), p.coord)
			p.probeNonce, p.probeSent, p.probeAnswer = g.nonce, now, false
			p.probeDue = now.Add(liveness.ProbeDeadline(est, g.health))
			go g.send(m, msgPing, gossipPing{From: self, Nonce: p.probeNonce})
		}
	}
	return out, fresh
}

// hear is the leader's handling of a report: the member answered (a
// refutation at a higher incarnation, a homework request while
// suspected), and its accusations start or confirm suspicions. It answers
// with the member's state and the table.
func (g *gossip) hear(ctx context.Context, r report, now time.Time) {
	if g.det == nil {
		return
	}
	// At a lower incarnation it is heard (as stale), so that the answer
	// tells the reporter the incarnation it must speak above.
	if last, ok := g.lastHeard[r.From]; ok && r.Incarnation == last[0] && r.Seq <= last[1] {
		return // heard already by another way, or overtaken by a later one
	}
	if last := g.lastHeard[r.From]; r.Incarnation >= last[0] {
		g.lastHeard[r.From] = [2]uint64{r.Incarnation, r.Seq}
	}
	n := len(g.c.sm.Members())
	h := g.det.Hear(r.From, r.Incarnation, r.Witness, r.Load, now)
	if h.Refuted {
		g.stats.refutations.Add(1)
	}
	a := answer{Leader: g.c.cfg.NodeID, State: h.State, Incarnation: r.Incarnation}
	if p, ok := g.det.Peer(r.From); ok {
		a.Known = p.Incarnation
	}
	if r.From == g.c.cfg.NodeID {
		a.State = liveness.Alive // the decider does not judge itself
	}
	if h.Homework != nil {
		a.Asked = true
		a.Denial, a.Detail, a.GrantMillis = string(h.Homework.Denial), h.Homework.Detail, h.Homework.Grant.Milliseconds()
		if h.Homework.Denial == liveness.Granted {
			g.stats.grants.Add(1)
			g.log.Info("late homework granted", "member", r.From, "incarnation", r.Incarnation, "witness", r.Witness, "grant", h.Homework.Grant)
		} else {
			g.stats.denials[slices.Index(liveness.Denials, h.Homework.Denial)].Add(1)
			g.log.Info("late homework denied", "member", r.From, "incarnation", r.Incarnation, "reason", h.Homework.Denial, "detail", h.Homework.Detail)
		}
	}
	for _, s := range r.Suspects {
		if s.Answered {
			g.det.Answered(s.Node)
		}
		if g.det.Accuse(s.Node, s.Incarnation, r.From, n, now) == liveness.AccuseStarted {
			g.stats.suspicions.Add(1)
			g.log.Info("member suspected", "member", s.Node, "incarnation", s.Incarnation, "by", r.From)
			g.notice(s.Node)
		}
	}
	g.mu.Lock()
	if r.From != g.c.cfg.NodeID {
		if p := g.peers[r.From]; p != nil {
			p.health = r.Health
		}
	}
	g.mu.Unlock()
	// A member heard alive with no settled fact, or back from a settled
	// death at a higher incarnation, is settled alive.
	if r.From == g.c.cfg.NodeID || (!h.Stale && h.State == liveness.Alive) {
		f, ok := g.c.sm.Liveness(r.From)
		if !ok || (f.State == replica.LivenessDead && r.Incarnation > f.Incarnation) {
			g.commit(ctx, replica.LivenessFact{Node: r.From, Incarnation: r.Incarnation, State: replica.LivenessAlive, Source: replica.LivenessDetector, Reason: "answered"})
		}
	}
	a.Table = g.tableRows()
	if r.From == g.c.cfg.NodeID {
		g.answered(ctx, a, now)
		return
	}
	if m, ok := g.c.sm.Member(r.From); ok {
		g.send(m, msgAnswer, a)
	}
}

// tableRows are the deciding table's rows, as answered.
func (g *gossip) tableRows() []verdictRow {
	var rows []verdictRow
	for _, p := range g.det.Peers() {
		row := verdictRow{Node: p.Node, State: p.State, Incarnation: p.Incarnation, GrantsUsed: p.GrantsUsed}
		g.mu.Lock()
		if v := g.peers[p.Node]; v != nil {
			row.Health = v.health
		}
		g.mu.Unlock()
		rows = append(rows, row)
	}
	return rows
}

// notice tells member node, now suspected, so at once: running, it asks
// for late homework and refutes before its suspicion runs out, though its
// next round may come after it is stopped again.
func (g *gossip) notice(node uint64) {
	p, ok := g.det.Peer(node)
	m, member := g.c.sm.Member(node)
	if !ok || !member || node == g.c.cfg.NodeID {
		return
	}
	g.send(m, msgAnswer, answer{Leader: g.c.cfg.NodeID, State: p.State, Incarnation: p.Incarnation, Known: p.Incarnation, Table: g.tableRows(), Notice: true})
}

// answered is a member's handling of the leader's answer: keep the table;
// suspected or dead at its incarnation, refute with a higher one, unless
// it is overloaded (an overloaded member is healed, not extended) or its
// control loop did not tick this period (a member whose witness does not
// advance is not doing its work). A grant it was given holds off the next
// suspicion (the grace window) while it refutes this one.
func (g *gossip) answered(ctx context.Context, a answer, now time.Time) {
	g.mu.Lock()
	g.last = a
	g.heard, g.heardAt = a.Leader, now
	g.table = map[uint64]verdictRow{}
	for _, r := range a.Table {
		g.table[r.Node] = r
	}
	inc := g.inc
	g.mu.Unlock()
	switch {
	case a.Known > inc:
		// The table holds it at an incarnation above its own (the one it
		// kept was lost): its reports are stale there until it speaks
		// above it.
		g.refute(ctx, a.State, "the deciding table holds a higher incarnation", a.Known, now)
	case a.State == liveness.Suspect && a.Incarnation == inc && a.Notice:
		// Told of the suspicion between its reports: one turn of its
		// control loop, then its report, which asks for late homework;
		// the answer to that refutes.
		g.controlTick(ctx)
		g.report(ctx, nil, now)
	case a.State != liveness.Alive && a.Incarnation == inc:
		g.refute(ctx, a.State, a.Denial, inc, now)
	}
}

// refute raises this node's incarnation past past, unless it is
// overloaded or its control loop did not tick, reports it to the leader at
// once and gossips it. At once: a node running in short bursts may be
// stopped again before its next round, and its suspicion, extended by the
// grant it was just given, must be cleared before that runs out.
func (g *gossip) refute(ctx context.Context, state liveness.State, why string, past uint64, now time.Time) {
	g.mu.Lock()
	loopOK, load := g.loopOK, g.load()
	g.mu.Unlock()
	if !loopOK {
		g.log.Warn("suspected, and the control loop did not tick: not refuting", "state", state)
		return
	}
	if over, detail := load.Overloaded(); over {
		g.log.Warn("suspected and overloaded: not refuting", "state", state, "load", detail)
		return
	}
	g.mu.Lock()
	g.inc = max(g.inc, past) // raise goes one past it
	g.mu.Unlock()
	if err := g.raise(); err != nil {
		g.log.Error("refute: cannot keep the incarnation", "err", err)
		return
	}
	g.stats.refutations.Add(1)
	g.mu.Lock()
	inc := g.inc
	g.mu.Unlock()
	g.log.Info("refuting", "state", state, "why", why, "incarnation", inc)
	g.report(ctx, nil, now)
	// Bounded: with no timeout memberlist waits for the broadcast to go out
	// however long that takes.
	if err := g.ml.UpdateNode(liveness.ProbePeriod / 2); err != nil {
		g.log.Debug("refute: gossip", "err", err)
	}
}

// commit proposes a settled fact in the meta group, once at a time per
// member.
func (g *gossip) commit(ctx context.Context, f replica.LivenessFact) {
	if g.pending[f.Node] {
		return
	}
	g.pending[f.Node] = true
	f.TS = time.Now().UnixNano()
	data, _ := json.Marshal(replica.MetaCommand{Op: replica.OpLiveness, Liveness: &f, TS: f.TS})
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		out, err := g.c.propose(pctx, node.MetaGroup, data)
		if err == nil {
			err = out.Err
		}
		select {
		case g.inbox <- append([]byte{msgDone}, mustJSON(f)...):
		case <-ctx.Done():
		}
		if err != nil {
			g.log.Info("liveness fact not committed", "member", f.Node, "state", f.State, "incarnation", f.Incarnation, "err", err)
			return
		}
		if f.State == replica.LivenessDead {
			g.stats.deaths.Add(1)
		}
		g.log.Info("liveness fact committed", "member", f.Node, "state", f.State, "incarnation", f.Incarnation, "source", f.Source)
	}()
}

// msgDone is the loop's own message: a fact's proposal ended.
const msgDone byte = 'd'

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// handle takes one message on the loop.
func (g *gossip) handle(ctx context.Context, b []byte, now time.Time) {
	if len(b) < 2 {
		return
	}
	body := b[1:]
	switch b[0] {
	case msgDone:
		var f replica.LivenessFact
		if json.Unmarshal(body, &f) == nil {
			delete(g.pending, f.Node)
		}
	case msgPing:
		var p gossipPing
		if json.Unmarshal(body, &p) == nil {
			if m, ok := g.c.sm.Member(p.From); ok {
				go g.send(m, msgPong, gossipPing{From: g.c.cfg.NodeID, Nonce: p.Nonce})
			}
		}
	case msgPong:
		var p gossipPing
		if json.Unmarshal(body, &p) == nil {
			g.mu.Lock()
			if v := g.peers[p.From]; v != nil && v.probeNonce == p.Nonce && !now.After(v.probeDue) {
				v.probeAnswer = true
			}
			g.mu.Unlock()
		}
	case msgReport:
		var r report
		if json.Unmarshal(body, &r) == nil && r.From != 0 {
			if g.det == nil {
				g.relayReport(r)
				return
			}
			g.hear(ctx, r, now)
		}
	case msgAnswer:
		var a answer
		if json.Unmarshal(body, &a) == nil {
			g.answered(ctx, a, now)
		}
	}
}

// send sends a message of the layer to member m, best effort (UDP).
func (g *gossip) send(m replica.Member, kind byte, v any) {
	b := append([]byte{kind}, mustJSON(v)...)
	if err := g.ml.SendToAddress(memberlist.Address{Addr: gossipAddrOf(m), Name: strconv.FormatUint(m.ID, 10)}, b); err != nil {
		g.log.Debug("gossip: send", "to", m.ID, "err", err)
	}
}

// load is the node's own load: its memory against its limit and the free
// disk under its data. Call with g.mu held (it reads nothing guarded, but
// is cheap).
func (g *gossip) load() liveness.Load {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	l := liveness.Load{MemoryUsed: ms.Sys - ms.HeapReleased, MemoryLimit: g.memLimit}
	var fs unix.Statfs_t
	if unix.Statfs(g.c.cfg.Data, &fs) == nil {
		l.DiskFree, l.DiskKnown = fs.Bavail*uint64(fs.Bsize), true
	}
	return l
}

// memoryLimit is the process's memory limit: GOMEMLIMIT's, else the
// cgroup's, else 0 (unknown).
func memoryLimit() uint64 {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return uint64(l)
	}
	b, err := os.ReadFile("/sys/fs/cgroup/memory.max")
	if err != nil {
		return 0
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return v
}

// metaIncarnation reads a member's incarnation from its memberlist
// metadata.
func metaIncarnation(b []byte) (uint64, bool) {
	var m struct {
		Inc uint64 `json:"inc"`
	}
	if json.Unmarshal(b, &m) != nil {
		return 0, false
	}
	return m.Inc, true
}

// gossipDelegate is memberlist's delegate: the node's metadata (its
// incarnation) and the layer's messages.
type gossipDelegate struct{ g *gossip }

func (d gossipDelegate) NodeMeta(limit int) []byte {
	d.g.mu.Lock()
	defer d.g.mu.Unlock()
	return mustJSON(map[string]uint64{"inc": d.g.inc})
}

// NotifyMsg hands a message to the loop; it must not block.
func (d gossipDelegate) NotifyMsg(b []byte) {
	select {
	case d.g.inbox <- slices.Clone(b):
	default:
	}
}

func (gossipDelegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (gossipDelegate) LocalState(join bool) []byte                { return nil }
func (gossipDelegate) MergeRemoteState(buf []byte, join bool)     {}

// gossipPing carries the node's coordinate on memberlist's acks and learns
// from each acknowledged probe's round trip.
type gossipPinger struct{ g *gossip }

func (p gossipPinger) AckPayload() []byte { return mustJSON(p.g.viv.Coordinate()) }

func (p gossipPinger) NotifyPingComplete(other *memberlist.Node, rtt time.Duration, payload []byte) {
	p.g.stats.probes.Add(1)
	id, err := strconv.ParseUint(other.Name, 10, 64)
	if err != nil {
		return
	}
	var c coordinate.Coordinate
	if json.Unmarshal(payload, &c) != nil {
		return
	}
	if err := p.g.viv.Observe(other.Name, &c, rtt); err != nil {
		p.g.log.Debug("coordinate not updated", "peer", id, "err", err)
		return
	}
	p.g.mu.Lock()
	v := p.g.peers[id]
	if v == nil {
		v = &peerView{}
		p.g.peers[id] = v
	}
	v.coord, v.rtt = &c, rtt
	v.mlSuspectAt = time.Time{}
	p.g.health = p.g.health.Answered()
	p.g.mu.Unlock()
}

// memberlistLog takes what memberlist v0.7.0 says only in its log (it
// has no hook for them): direct probes that timed out and went to
// indirect probes (counted), and its own suspicions (counted, and the
// member marked failing for the layer's own probe). It passes each line
// on at its level. TestLivenessStoppedNodeSettledDeadThenAlive fails if
// another memberlist words them otherwise.
type memberlistLog struct{ g *gossip }

func (w *memberlistLog) Write(b []byte) (int, error) {
	s := string(b)
	switch {
	case strings.Contains(s, "memberlist: Failed UDP ping:"):
		w.g.stats.indirect.Add(1)
	case strings.Contains(s, "memberlist: Suspect ") && strings.Contains(s, " has failed"):
		w.g.stats.mlSuspicions.Add(1)
		name := s[strings.Index(s, "memberlist: Suspect ")+len("memberlist: Suspect "):]
		name = name[:strings.Index(name, " has failed")]
		if id, err := strconv.ParseUint(name, 10, 64); err == nil {
			w.g.mu.Lock()
			v := w.g.peers[id]
			if v == nil {
				v = &peerView{}
				w.g.peers[id] = v
			}
			v.mlSuspectAt = time.Now()
			w.g.mu.Unlock()
		}
	}
	if strings.Contains(s, "[DEBUG]") {
		w.g.log.Debug(strings.TrimSpace(s))
	} else {
		w.g.log.Info(strings.TrimSpace(s))
	}
	return len(b), nil
}

var _ io.Writer = (*memberlistLog)(nil)
