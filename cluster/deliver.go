package cluster

import (
	"context"

	"tally/cluster/node"
	"tally/service"
	"tally/timekeeper"
)

// Deliveries: the lapses and promise notices of a session go out from the
// leader of its group, through a timekeeper that commits nothing (the facts
// are proposed by the group's timekeeper, timekeep) and reads this
// replica's log. Each timekeeper journals what it delivered beside the
// session's log on this node; a new leader, whose journal lacks what the
// old one sent, sends it again, under the same key (the A2A message id, the
// webhook's Idempotency-Key): deliveries are at least once, as a restarted
// `tally watch` makes them.

// NewDeliverer makes a session's delivery timekeeper (timekeeper.Config
// DeliverOnly, at the wall clock), with the sinks of the server, over the
// node's Service (it reads this replica's log and journals beside it).
type NewDeliverer func(ctx context.Context, svc service.Timekeeping, call service.Call) (*timekeeper.Timekeeper, error)

// Deliver gives the node's timekeeper its deliverer: from then on, after
// its sweeps, it delivers each session of the groups this node leads
// (timekeep). The server is made after the node, hence a setter; without
// a timekeeper (WatchEvery 0) nothing is delivered.
func (c *Node) Deliver(mk NewDeliverer) { c.deliverer.Store(&mk) }

// delivering is a session's timekeeper and the group it was made for.
type delivering struct {
	w     *timekeeper.Timekeeper
	group uint64
}

// deliveries are the timekeeper's timekeepers, by session.
type deliveries map[string]*delivering

// dropLost closes the timekeepers of groups this node no longer leads:
// another node leads them now, and delivers.
func (ds deliveries) dropLost(leading map[uint64]bool) {
	for key, d := range ds {
		if !leading[d.group] {
			d.w.Close()
			delete(ds, key)
		}
	}
}

func (ds deliveries) close() {
	for _, d := range ds {
		d.w.Close()
	}
}

// deliverSession sweeps one session's timekeeper. A replica that installed
// another copy of the session's log is followed from its start again
// (service.Timeline's Reset), so the timekeeper lives as long as the node
// leads the group.
func (c *Node) deliverSession(ctx context.Context, ws deliveries, call service.Call, group uint64, mk NewDeliverer) {
	key := call.Tenant + "/" + call.Session
	d := ws[key]
	if d != nil && d.group != group {
		d.w.Close()
		d = nil
	}
	if d == nil {
		w, err := mk(ctx, c, call)
		if err != nil {
			delete(ws, key)
			c.log.Warn("deliveries: watcher", "session", key, "err", err)
			return
		}
		d = &delivering{w: w, group: group}
		ws[key] = d
	}
	if rep, err := d.w.Sweep(ctx); err != nil {
		c.log.Warn("deliveries: sweep", "session", key, "err", err)
	} else if rep.Delivered > 0 || rep.Failed > 0 {
		c.log.Debug("deliveries", "session", key, "delivered", rep.Delivered, "failed", rep.Failed)
	}
}

// leading is the groups this node leads.
func (c *Node) leading(ctx context.Context) map[uint64]bool {
	leading := map[uint64]bool{}
	_ = c.do(ctx, func(n *node.MultiRaft) {
		for _, gt := range n.Leading() {
			leading[gt.Group] = true
		}
	})
	return leading
}
