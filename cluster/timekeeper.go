package cluster

import (
	"context"
	"time"

	"tally/cluster/replica"
	"tally/ledger"
	"tally/service"
	"tally/store"
)

// The timekeeper's commands: commit, at the proposer's instant, every
// lapse and withdrawal due in the session (MethodSweep), or every claim
// deadline passed (MethodSweepClaims: Expired, or Deadlocked for a wait
// cycle's victim). Stored in the raft log: do not rename.
const (
	MethodSweep       = "Sweep"
	MethodSweepClaims = "SweepClaims"
)

// sweepMax bounds the facts one sweep commits.
const sweepMax = 1000

// SweepDoc is a sweep's command document (it has nothing of its own: the
// instant is the command's). Exported, with DueSweeps, for the simulator,
// which proposes the timekeeper's sweeps as a node does.
type SweepDoc struct{}

// sweepMethod applies a sweep on a replica: the ledger decides what is due
// at the command's instant, under its lock, so every replica commits the
// same facts, and a sweep proposed twice (two leaders across a change)
// commits nothing the second time: the facts' ids are deterministic, and a
// claim's deadline fact is refused once committed.
func sweepMethod(sm func() *replica.SM, sweep func(*ledger.Ledger, context.Context, int) ([]ledger.Result, error)) replica.Method {
	return method(func(_ service.Service, ctx context.Context, call service.Call, _ SweepDoc) (int, error) {
		l, err := sm().Open(ctx, call.Tenant, call.Session, false)
		if err != nil {
			return 0, err
		}
		res, err := sweep(l, ctx, sweepMax)
		return len(res), err
	})
}

// timekeep runs each group's timekeeper on its leader: every interval it
// looks, in this replica, at the sessions of the groups it leads; for one
// with an expectation or a claim deadline due it proposes the sweeps, and
// then, once Deliver gave it a deliverer, it delivers what the session's
// log holds (deliver.go). One pass over the sessions does both: each is
// listed and opened once a tick.
func (c *Node) timekeep(ctx context.Context, every time.Duration) {
	ds := deliveries{}
	defer ds.close()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.timekeeps.Add(1)
		leading := c.leading(ctx)
		ds.dropLost(leading)
		if len(leading) == 0 {
			continue
		}
		sessions, err := store.Sessions(c.sm.Root(), "")
		if err != nil {
			c.log.Warn("timekeeper: list sessions", "err", err)
			continue
		}
		mk := c.deliverer.Load()
		for _, se := range sessions {
			if ctx.Err() != nil {
				return
			}
			// The group holding its log here, not the directory's: a
			// placement this node has not applied yet moves nothing.
			g := c.sm.Holder(se.Tenant, se.Name)
			if !leading[g] {
				continue
			}
			c.sweep(ctx, se)
			if mk != nil {
				c.deliverSession(ctx, ds, se, g, *mk)
			}
		}
	}
}

// sweep proposes the sweeps a session needs now.
func (c *Node) sweep(ctx context.Context, se store.Session) {
	call := service.Call{Tenant: se.Tenant, Session: se.Name, Actor: c.cfg.Ledger.Timekeeper}
	for _, m := range DueSweeps(ctx, c.sm, se.Tenant, se.Name, time.Now()) {
		if _, err := write[SweepDoc, int](ctx, c, m, call, SweepDoc{}); err != nil {
			c.log.Warn("timekeeper: sweep", "session", se.String(), "sweep", m, "err", err)
		}
	}
}

// DueSweeps is the sweeps a session of the replica needs by now, as its
// group's leader's timekeeper proposes them: of its expectations due
// (MethodSweep), of its claims' deadlines passed (MethodSweepClaims).
func DueSweeps(ctx context.Context, sm *replica.SM, tenant, session string, now time.Time) []string {
	l, err := sm.Open(ctx, tenant, session, false)
	if err != nil {
		return nil
	}
	var sweeps []string
	l.Read(func(st *ledger.State) {
		if next, ok := st.Expects.NextDue(); ok && !now.Before(next) {
			sweeps = append(sweeps, MethodSweep)
		}
		if len(ledger.DueClaimDeadlines(st, now, 1)) > 0 {
			sweeps = append(sweeps, MethodSweepClaims)
		}
	})
	return sweeps
}
