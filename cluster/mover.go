package cluster

// The mover: on the meta group's leader, each move carried on from the
// step the meta group records.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/internal/tick"
)

// whileMetaLeader calls step every period while this node leads the meta
// group, and follower (if not nil) at each period it does not, until ctx
// ends or step reports it is done.
func (c *Node) whileMetaLeader(ctx context.Context, every time.Duration, step func() (done bool), follower func()) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	tick.Every(ctx, every, func() {
		if !c.leading(ctx)[node.MetaGroup] {
			if follower != nil {
				follower()
			}
			return
		}
		if step() {
			stop()
		}
	})
}

// mover carries the meta group's moves on while this node leads it.
func (c *Node) mover(ctx context.Context) {
	var mu sync.Mutex
	running := map[uint64]bool{}
	c.whileMetaLeader(ctx, moveEvery, func() bool {
		for _, mv := range c.sm.Moves() {
			if mv.Step == replica.MoveRetired || (mv.Step == replica.MoveAborted && mv.Unwound) {
				continue
			}
			mu.Lock()
			busy := running[mv.ID]
			running[mv.ID] = true
			mu.Unlock()
			if busy {
				continue
			}
			c.wg.Add(1)
			go func() {
				defer c.wg.Done()
				if err := c.carryMove(ctx, mv); err != nil && ctx.Err() == nil {
					c.log.Warn("move: step not taken", "move", mv.ID, "session", mv.Name(), "step", mv.Step, "err", err)
				}
				mu.Lock()
				delete(running, mv.ID)
				mu.Unlock()
			}()
		}
		return false
	}, nil)
}

// carryMove takes the move's next steps from the one recorded, until it
// ends or a step fails (the mover tries again on its next pass).
func (c *Node) carryMove(ctx context.Context, mv replica.Move) error {
	for {
		if mv.Step != replica.MoveAborted && mv.Step != replica.MoveActivated && mv.Step != replica.MoveRetired &&
			time.Since(time.Unix(0, mv.Updated)) > MoveStallMax {
			why := fmt.Sprintf("no step for %s at step %s: the destination unreachable or the copy not converging", MoveStallMax, mv.Step)
			next, err := c.moveStep(ctx, replica.MoveStep{Step: replica.MoveAborted, Reason: why}, mv)
			if err != nil {
				return err
			}
			mv = next
			c.metrics.moves.WithLabelValues("timed_out").Inc()
		}
		bound := moveStepTimeout
		if mv.Step == replica.MoveBegun || mv.Step == replica.MoveCopied {
			bound = moveCopyTimeout
		}
		sctx, cancel := context.WithTimeout(ctx, bound)
		next, err := c.moveOnce(sctx, mv)
		cancel()
		if err != nil {
			return err
		}
		if next.Step == mv.Step && next.Unwound == mv.Unwound && next.Bytes == mv.Bytes {
			return nil
		}
		mv = next
		if mv.Step == replica.MoveRetired || (mv.Step == replica.MoveAborted && mv.Unwound) {
			return nil
		}
	}
}

// moveOnce takes one step of the move.
func (c *Node) moveOnce(ctx context.Context, mv replica.Move) (replica.Move, error) {
	switch mv.Step {
	case replica.MoveBegun, replica.MoveCopied:
		// Copy rounds, then the fence once the tail is short.
		end, err := c.moveCommand(ctx, mv.From, replica.MethodMoveProbe, mv.Tenant, mv.Session, replica.MoveDoc{Move: mv.ID})
		if err != nil {
			return mv, err
		}
		if mv.Step == replica.MoveBegun || end.Length-int64(mv.Bytes) > moveCatchUpSlack {
			staged, err := c.stageAll(ctx, mv, end.Length)
			if err != nil {
				return mv, err
			}
			if uint64(staged) > mv.Bytes || mv.Step == replica.MoveBegun {
				return c.moveStep(ctx, replica.MoveStep{Step: replica.MoveCopied, Bytes: uint64(staged)}, mv)
			}
		}
		fenced, err := c.moveCommand(ctx, mv.From, replica.MethodMoveFence, mv.Tenant, mv.Session, replica.MoveDoc{Move: mv.ID, To: mv.To})
		if err != nil {
			return mv, err
		}
		c.log.Info("move: source fenced", "move", mv.ID, "session", mv.Name(), "seq", fenced.Seq, "bytes", fenced.Length)
		return c.moveStep(ctx, replica.MoveStep{Step: replica.MoveFenced, Seq: fenced.Seq, Chain: fenced.Chain, Length: uint64(fenced.Length)}, mv)
	case replica.MoveFenced:
		if _, err := c.stageAll(ctx, mv, int64(mv.Length)); err != nil {
			return mv, err
		}
		// An abort committed meanwhile: the install must not follow it.
		if err := c.readIndex(ctx, node.MetaGroup); err != nil {
			return mv, err
		}
		if now, ok := c.moveOf(mv.ID); !ok || now.Step != replica.MoveFenced {
			return now, nil
		}
		got, err := c.moveCommand(ctx, mv.To, replica.MethodMoveInstall, mv.Tenant, mv.Session,
			replica.MoveDoc{Move: mv.ID, From: mv.From, To: mv.To, Seq: mv.Seq, Chain: mv.Chain, Length: int64(mv.Length), Holders: c.groupHolders(mv.From)})
		if err != nil {
			return mv, err
		}
		return c.moveStep(ctx, replica.MoveStep{Step: replica.MoveProven, Seq: got.Seq, Chain: got.Chain, Length: uint64(got.Length)}, mv)
	case replica.MoveProven:
		if fault.FromEnv().HoldMoves {
			return mv, fmt.Errorf("fault injected (%s): the move is held at proven", fault.HoldMovesEnv)
		}
		next, err := c.moveStep(ctx, replica.MoveStep{Step: replica.MoveActivated}, mv)
		if err == nil {
			c.metrics.moves.WithLabelValues("activated").Inc()
			c.metrics.moveFenced.Observe(time.Duration(next.Activated - next.Fenced).Seconds())
			c.log.Info("move activated", "move", mv.ID, "session", mv.Name(), "group", mv.To, "epoch", next.Epoch+1)
		}
		return next, err
	case replica.MoveActivated:
		if wait := MoveRetireGrace - time.Since(time.Unix(0, mv.Activated)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return mv, ctx.Err()
			}
		}
		if _, err := c.moveCommand(ctx, mv.From, replica.MethodMoveRetire, mv.Tenant, mv.Session, replica.MoveDoc{Move: mv.ID, To: mv.To}); err != nil {
			return mv, err
		}
		return c.moveStep(ctx, replica.MoveStep{Step: replica.MoveRetired}, mv)
	case replica.MoveAborted:
		// The source first: it serves again even if the destination is
		// gone; the destination's copy goes when it can be reached.
		if _, err := c.moveCommand(ctx, mv.From, replica.MethodMoveUnfence, mv.Tenant, mv.Session, replica.MoveDoc{Move: mv.ID}); err != nil {
			return mv, err
		}
		if !mv.Unfenced {
			c.metrics.moves.WithLabelValues("aborted").Inc()
			next, err := c.moveStep(ctx, replica.MoveStep{Step: replica.MoveUnfenced}, mv)
			if err != nil {
				return mv, err
			}
			mv = next
			c.log.Info("move aborted: the source serves the session again", "move", mv.ID, "session", mv.Name(), "reason", mv.Reason)
		}
		if _, err := c.moveCommand(ctx, mv.To, replica.MethodMoveDrop, mv.Tenant, mv.Session, replica.MoveDoc{Move: mv.ID, From: mv.From}); err != nil {
			return mv, err
		}
		c.unstageAll(ctx, mv)
		return c.moveStep(ctx, replica.MoveStep{Step: replica.MoveUnwound}, mv)
	}
	return mv, nil
}

// moveOf is the move with id as this node has applied the meta group.
func (c *Node) moveOf(id uint64) (replica.Move, bool) {
	for _, mv := range c.sm.Moves() {
		if mv.ID == id {
			return mv, true
		}
	}
	return replica.Move{}, false
}

// unstageAll removes the destination nodes' staged copies, as far as
// they can be reached (a copy left is overwritten by the next stage).
func (c *Node) unstageAll(ctx context.Context, mv replica.Move) {
	_ = c.sm.Unstage(mv.Tenant, mv.Session)
	for _, id := range c.groupNodes(mv.To) {
		var end replica.LogEnd
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, moveStageRequest{Tenant: mv.Tenant, Session: mv.Session, From: mv.From, Upto: -1})
		_ = c.callNode(ctx, id, MoveStagePath, &req, &end)
	}
}

// moveStep commits a move's step and returns the move as recorded.
func (c *Node) moveStep(ctx context.Context, s replica.MoveStep, mv replica.Move) (replica.Move, error) {
	s.Tenant, s.Session, s.Move = mv.Tenant, mv.Session, mv.ID
	out, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpMoveStep, Move: &s})
	if err != nil {
		return mv, err
	}
	next, ok := out.Value.(replica.Move)
	if !ok {
		return mv, fmt.Errorf("move.step returned %T", out.Value)
	}
	return next, nil
}

// movedOn is the group a read of a session fenced in g for its move is
// served from: g until the move's activation, the destination after it,
// as the meta group's quorum has it. Once activated, the destination
// takes writes the source never sees, while the source stays fenced until
// it retires; a node whose directory lags would otherwise read the source
// and miss them.
func (c *Node) movedOn(ctx context.Context, g uint64, tenant, session string) (uint64, error) {
	if _, moving := c.sm.MovingTo(g, tenant, session); !moving {
		return g, nil
	}
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return 0, err
	}
	return c.sm.GroupOf(tenant, session), nil // the caller reads there next
}

// groupHolders are the nodes that hold group's bytes: its recorded
// voters, or every member when no factor is set.
func (c *Node) groupHolders(group uint64) []uint64 {
	if conf, ok := c.sm.Policy().Groups[group]; ok && len(conf.Voters) > 0 {
		return sorted(conf.Voters)
	}
	var ids []uint64
	for _, m := range c.sm.Members() {
		ids = append(ids, m.ID)
	}
	return ids
}
