package cluster

import (
	"context"
	"time"

	"tally/cluster/node"
	"tally/ledger"
	"tally/store"
	"tally/watch"
)

// Deliveries: the lapses and promise notices of a session go out from the
// leader of its group, through a watcher that commits nothing (the facts
// are proposed by the group's timekeeper, timekeep) and reads this
// replica's log. Each watcher journals what it delivered beside the
// session's log on this node; a new leader, whose journal lacks what the
// old one sent, sends it again, under the same key (the A2A message id, the
// webhook's Idempotency-Key): deliveries are at least once, as a restarted
// `tally watch` makes them.

// NewDeliverer makes a session's delivery watcher (watch.Config
// DeliverOnly, at the wall clock), with the sinks of the server.
type NewDeliverer func(*ledger.Ledger) (*watch.Watcher, error)

// Deliver runs this node's deliveries every interval until the node
// closes. Call it once, before Close.
func (c *Node) Deliver(every time.Duration, mk NewDeliverer) {
	c.wg.Add(1)
	go func() { defer c.wg.Done(); c.deliver(c.ctx, every, mk) }()
}

// delivering is a session's watcher over the ledger it was opened on.
type delivering struct {
	l     *ledger.Ledger
	w     *watch.Watcher
	group uint64
}

func (c *Node) deliver(ctx context.Context, every time.Duration, mk NewDeliverer) {
	ws := map[string]*delivering{}
	defer func() {
		for _, d := range ws {
			d.w.Close()
		}
	}()
	dropLost := func(leading map[uint64]bool) {
		for key, d := range ws {
			if !leading[d.group] {
				d.w.Close() // another node leads it now, and delivers
				delete(ws, key)
			}
		}
	}
	c.everyLed(ctx, every, "deliveries", dropLost, func(se store.Session, g uint64) {
		c.deliverSession(ctx, ws, se, g, mk)
	})
}

// deliverSession sweeps one session's watcher, made anew when the replica
// reopened the session's ledger.
func (c *Node) deliverSession(ctx context.Context, ws map[string]*delivering, se store.Session, group uint64, mk NewDeliverer) {
	key := se.String()
	l, err := c.sm.Open(ctx, se.Tenant, se.Name, false)
	if err != nil {
		return
	}
	d := ws[key]
	if d == nil || d.l != l {
		if d != nil {
			d.w.Close()
		}
		w, err := mk(l)
		if err != nil {
			delete(ws, key)
			c.log.Warn("deliveries: watcher", "session", key, "err", err)
			return
		}
		d = &delivering{l: l, w: w, group: group}
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
	_ = c.do(ctx, func(n *node.Node) {
		for _, gt := range n.Leading() {
			leading[gt.Group] = true
		}
	})
	return leading
}
