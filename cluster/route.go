package cluster

// Routing. A session's commands and reads go to the group the directory
// names as this node has applied the meta group (replica.SM.GroupOf). A
// node that has not applied a placement yet goes to the group the session
// was fenced in: that group refuses the session's commands
// (replica.Moved), and a read finds the session fenced there once the
// group is read-consistent. The node then catches up with the meta group
// (a read index confirmed by its quorum, which brings every placement
// recorded before it) and goes to the group the directory names now. The
// node follows the session itself, rather than leave it to the client: it
// can read the directory linearizably, a client cannot, and every binding
// (REST, A2A, MCP) gets it. A refused command changed nothing, so it is
// safe to propose it again in the other group.

import (
	"context"
	"errors"
	"strings"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
)

// The bounds of following a session to its placement: the groups one
// request goes to, and how long a node waits for the directory to record
// the placement of a session fenced where it routed (the operator's place
// records it right after the fence; a placement stopped between its steps
// is answered 503 Moved once this has passed).
const (
	routeHopsMax  = 3
	placedWaitMax = 2 * time.Second
	placedPoll    = 100 * time.Millisecond
)

// routed runs op (a proposal of one command) in the session's group,
// following the session when that group refuses it as moved, and returns
// op's outcome and the group that gave it.
func (c *Node) routed(ctx context.Context, tenant, session string, op func(group uint64) (replica.Outcome, error)) (replica.Outcome, uint64, error) {
	g := c.sm.GroupOf(tenant, session)
	for hop := 1; ; hop++ {
		out, err := op(g)
		var mv *replica.Moved
		var moving *replica.Moving
		if err == nil && errors.As(out.Err, &moving) && hop < routeHopsMax {
			// The session is moving: its cut-over is short, so wait for
			// the directory to name its new group, else answer Moving.
			next, err := c.placed(ctx, &replica.Moved{Session: moving.Session, From: g, Group: moving.To})
			if err != nil || next == g {
				return out, g, err
			}
			g = next
			continue
		}
		if err != nil || !errors.As(out.Err, &mv) || hop == routeHopsMax {
			return out, g, err
		}
		next, err := c.placed(ctx, mv)
		if err != nil {
			return out, g, err
		}
		if next == g {
			return replica.Outcome{Err: unrecorded(mv)}, g, nil
		}
		g = next
	}
}

// readConsistent waits until the session's group is read-consistent here
// (a quorum-confirmed read index, applied), following the session when
// that group has fenced it.
func (c *Node) readConsistent(ctx context.Context, tenant, session string) error {
	g := c.sm.GroupOf(tenant, session)
	for hop := 1; ; hop++ {
		if err := c.readIndex(ctx, g); err != nil {
			return err
		}
		to, fenced := c.sm.FencedTo(g, tenant, session)
		if !fenced {
			next, err := c.movedOn(ctx, g, tenant, session)
			if err != nil || next == g {
				return err
			}
			if hop == routeHopsMax {
				return &replica.Moving{Session: tenant + "/" + session, From: g, To: next}
			}
			g = next
			continue
		}
		mv := &replica.Moved{Session: tenant + "/" + session, From: g, Group: to}
		if hop == routeHopsMax {
			return mv
		}
		next, err := c.placed(ctx, mv)
		if err != nil {
			return err
		}
		if next == g {
			return unrecorded(mv)
		}
		g = next
	}
}

// placed waits until the directory, caught up with the meta group's
// quorum, routes the moved session away from the group that refused it, up
// to placedWaitMax, and returns the group it routes to then.
func (c *Node) placed(ctx context.Context, mv *replica.Moved) (uint64, error) {
	tenant, session, _ := strings.Cut(mv.Session, "/")
	deadline := time.Now().Add(placedWaitMax)
	for {
		if err := c.readIndex(ctx, node.MetaGroup); err != nil {
			return 0, err
		}
		if g := c.sm.GroupOf(tenant, session); g != mv.From || !time.Now().Before(deadline) {
			return g, nil
		}
		select {
		case <-time.After(placedPoll):
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-c.ctx.Done():
			return 0, ErrStopped
		}
	}
}

// unrecorded is mv once the directory was found not to record the
// placement the session is fenced for.
func unrecorded(mv *replica.Moved) *replica.Moved {
	out := *mv
	out.Unrecorded = true
	return &out
}
