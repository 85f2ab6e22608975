package cluster

// A member's side of the layer: its own probes and accusations, its
// reports to the decider, its refutations, and its load.

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"golang.org/x/sys/unix"

	"tally/cluster/liveness"
	"tally/cluster/node"
	"tally/cluster/replica"
)

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
