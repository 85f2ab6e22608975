package cluster

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"tally/cluster/replica"
	"tally/internal/tick"
	"tally/service"
)

// The timekeeper's commands: commit, at the proposer's instant, every
// lapse and withdrawal due in the session (MethodSweep), or every claim
// deadline passed (MethodSweepClaims: Expired, or Deadlocked for a wait
// cycle's victim). Stored in the raft log: do not rename.
const (
	MethodSweep       = "Sweep"
	MethodSweepClaims = "SweepClaims"
)

// sweepMax bounds the facts one sweep commits when its command names no
// bound.
const sweepMax = 1000

// SweepDoc is a sweep's command document: the bound on the facts it
// commits (zero: sweepMax; the instant is the command's). Exported, with
// DueSweeps, for the simulator, which proposes the timekeeper's sweeps as a
// node does.
type SweepDoc struct {
	Max int `json:"max,omitempty"`
}

// sweepMethod applies a sweep of kind on a replica, through its Service:
// what is due at the command's instant is decided under the session's
// lock, so every replica commits the same facts, and a sweep proposed twice
// (two leaders across a change) commits nothing the second time: the facts'
// ids are deterministic, and a claim's deadline fact is refused once
// committed.
func sweepMethod(kind string) replica.Method {
	return method(func(svc service.Service, ctx context.Context, call service.Call, d SweepDoc) (service.Swept, error) {
		tk, ok := svc.(service.Timekeeping)
		if !ok {
			return service.Swept{}, fmt.Errorf("cluster: the replica's Service (%T) keeps no time", svc)
		}
		return tk.Sweep(ctx, call, kind, cmp.Or(d.Max, sweepMax))
	})
}

// sweepMethods are the timekeeper's commands by kind.
var sweepMethods = map[string]string{service.SweepExpectations: MethodSweep, service.SweepClaims: MethodSweepClaims}

var _ service.Timekeeping = (*Node)(nil)

// Due reads what the session owes its timekeeper from this replica (a
// leader's timekeeper asks of the groups it leads, call.Stale), else once
// the group is read-consistent here.
func (c *Node) Due(ctx context.Context, call service.Call) (service.Due, error) {
	return read(ctx, c, call, func(svc service.Service, call service.Call) (service.Due, error) {
		return timekeeping(svc).Due(ctx, call)
	})
}

// Sweep proposes the sweep of kind to the session's group: each replica
// commits what is due at the proposer's instant; the answer is what this
// replica committed.
func (c *Node) Sweep(ctx context.Context, call service.Call, kind string, max int) (service.Swept, error) {
	m, ok := sweepMethods[kind]
	if !ok {
		return service.Swept{}, fmt.Errorf("sweep: no sweep of kind %q", kind)
	}
	return write[SweepDoc, service.Swept](ctx, c, m, call, SweepDoc{Max: max})
}

// Timeline reads this replica's log: a node's deliveries are of what its
// replica applied.
func (c *Node) Timeline(ctx context.Context, call service.Call, since service.Cursor) (service.Timeline, error) {
	return timekeeping(c.sm.Service()).Timeline(ctx, call, since)
}

// PromiseTimes reads this replica.
func (c *Node) PromiseTimes(ctx context.Context, call service.Call, ids []string) (map[string]service.PromiseTime, error) {
	return timekeeping(c.sm.Service()).PromiseTimes(ctx, call, ids)
}

// JournalDir is the journal beside this replica's copy of the session: a
// node journals what it delivered.
func (c *Node) JournalDir(ctx context.Context, call service.Call) (string, error) {
	return timekeeping(c.sm.Service()).JournalDir(ctx, call)
}

// timekeeping is a replica's Service as the timekeeper asks it: every
// replica runs ledgerservice.Local, which keeps time.
func timekeeping(svc service.Service) service.Timekeeping {
	return svc.(service.Timekeeping)
}

// timekeep runs each group's timekeeper on its leader: every interval it
// looks, in this replica, at the sessions of the groups it leads; for one
// with an expectation or a claim deadline due it proposes the sweeps
// (Node.Sweep), and then, once Deliver gave it a deliverer, it delivers
// what the session's log holds (deliver.go). One pass over the sessions
// does both. Everything goes through the node's Service.
func (c *Node) timekeep(ctx context.Context, every time.Duration) {
	ds := deliveries{}
	defer ds.close()
	tick.Every(ctx, every, func() {
		c.timekeeps.Add(1)
		leading := c.leading(ctx)
		ds.dropLost(leading)
		if len(leading) == 0 {
			return
		}
		sessions, err := c.sm.Service().(service.Browse).SessionList(ctx, service.Call{})
		if err != nil {
			c.log.Warn("timekeeper: list sessions", "err", err)
			return
		}
		mk := c.deliverer.Load()
		for _, se := range sessions {
			if ctx.Err() != nil {
				return
			}
			// The group holding its log here, not the directory's: a
			// placement this node has not applied yet moves nothing.
			g := c.sm.Holder(se.Tenant, se.Session)
			if !leading[g] {
				continue
			}
			call := service.Call{Tenant: se.Tenant, Session: se.Session, Actor: c.cfg.Ledger.Timekeeper, Stale: true}
			c.sweep(ctx, call)
			if mk != nil {
				c.deliverSession(ctx, ds, call, g, *mk)
			}
		}
	})
}

// sweep proposes the sweeps a session needs now.
func (c *Node) sweep(ctx context.Context, call service.Call) {
	call.Now = time.Now()
	for _, kind := range dueKinds(ctx, c, call) {
		if _, err := c.Sweep(ctx, call, kind, sweepMax); err != nil {
			c.log.Warn("timekeeper: sweep", "session", call.Tenant+"/"+call.Session, "sweep", sweepMethods[kind], "err", err)
		}
	}
}

// dueKinds is the sweeps svc says call's session needs at call.Now.
func dueKinds(ctx context.Context, svc service.Timekeeping, call service.Call) []string {
	due, err := svc.Due(ctx, call)
	if err != nil {
		return nil
	}
	var kinds []string
	if due.Expectations {
		kinds = append(kinds, service.SweepExpectations)
	}
	if due.Claims {
		kinds = append(kinds, service.SweepClaims)
	}
	return kinds
}

// DueSweeps is the sweeps a session of the replica needs by now, as its
// group's leader's timekeeper proposes them: of its expectations due
// (MethodSweep), of its claims' deadlines passed (MethodSweepClaims).
func DueSweeps(ctx context.Context, sm *replica.SM, tenant, session string, now time.Time) []string {
	var sweeps []string
	for _, kind := range dueKinds(ctx, timekeeping(sm.Service()), service.Call{Tenant: tenant, Session: session, Now: now}) {
		sweeps = append(sweeps, sweepMethods[kind])
	}
	return sweeps
}
