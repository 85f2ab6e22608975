package cluster

// The decider's side of the layer, at the meta group's leader: hearing
// reports, the table's answers and notices, and committing its facts.

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"tally/cluster/liveness"
	"tally/cluster/node"
	"tally/cluster/replica"
)

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
