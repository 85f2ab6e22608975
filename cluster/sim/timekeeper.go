package sim

import (
	"context"
	"time"

	"tally/cluster"
	"tally/cluster/node"
	"tally/service"
	"tally/store"
)

// keepEvery is how often each node's timekeeper looks (a node's
// WatchEvery), in virtual time.
const keepEvery = 400 * time.Millisecond

// scheduleKeep runs the node's timekeeper every keepEvery while it is up,
// as a node's timekeep loop does: for each session of a data group it
// leads then (held by the group in its replica), the sweeps
// cluster.DueSweeps says are due at the virtual instant, each proposed as
// the command a node proposes (cluster.NewCommand). Two nodes may both
// believe they lead, and a sweep is lost or proposed again across a
// change; now and then the same command is proposed twice on purpose. The
// sweeps' facts have deterministic ids, so a repeat commits nothing
// (checkFamilies).
func (w *World) scheduleKeep(sn *simNode, delay int64) {
	epoch := sn.epoch
	w.at(w.now+delay, func() {
		if !sn.up || sn.epoch != epoch {
			return
		}
		w.keep(sn)
		w.scheduleKeep(sn, int64(keepEvery))
	})
}

func (w *World) keep(sn *simNode) {
	leading := map[uint64]bool{}
	for _, gt := range sn.n.Leading() {
		if gt.Group != node.MetaGroup {
			leading[gt.Group] = true
		}
	}
	if len(leading) == 0 {
		return
	}
	sessions, err := store.Sessions(sn.dir, tenant)
	if err != nil {
		w.fail("node %d: timekeeper: list sessions: %v", sn.id, err)
		return
	}
	sm, now := sn.sm, w.clock.Now()
	for _, se := range sessions {
		g := sm.Holder(se.Tenant, se.Name)
		if !leading[g] {
			continue
		}
		call := service.Call{Tenant: se.Tenant, Session: se.Name, Actor: timekeeper}
		for _, m := range cluster.DueSweeps(context.Background(), sm, se.Tenant, se.Name, now) {
			data, err := w.command(m, call, cluster.SweepDoc{}, nil)
			if err != nil {
				w.fail("node %d: timekeeper: %v", sn.id, err)
				return
			}
			copies := 1
			if w.rng.IntN(4) == 0 {
				copies = 2
			}
			for range copies {
				w.mix(13, sn.id, g)
				sn.n.Propose(g, data, func(r node.ProposeResult) {
					if r.Err != nil {
						return // the next look proposes it again if still due
					}
					out, ok := sm.Take(g, r.Index)
					if !ok {
						w.fail("node %d has no outcome for entry %d of group %d", sn.id, r.Index, g)
						return
					}
					swept, _ := out.Value.(service.Swept)
					n := swept.Count()
					switch {
					case out.Err != nil:
						w.fail("node %d: %s of %s: %v", sn.id, m, se.Name, out.Err)
					case n == 0:
						w.stats.SweepsEmpty++
					default:
						w.stats.Sweeps++
					}
				})
			}
		}
	}
}
