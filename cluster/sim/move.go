package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"tally/cluster"
	"tally/cluster/model"
	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/service"
)

// Moves in a run (Options.Move): a mover moves the first session to the
// data group after its own through the faults, one committed step at a
// time as the cluster's mover does (cluster/move.go): the move begun in
// the meta group, the source probed and the copy recorded, the source
// fenced (MoveFence) and its end recorded, the destination's install
// (MoveInstall) checked against that end and recorded as the proof, the
// activation, and after a grace the source retired (MoveRetire). Each
// step is proposed through some live node and retried elsewhere until
// answered, a repeat answering as the first. On some runs the mover
// aborts before activation, as an operator would; on every run it aborts
// a move that made no step for moveStallMax of virtual time. An abort
// unfences the source, then drops the destination's copy. Around its
// steps the mover adds its own faults: the source's leader crashed as it
// fences, the destination's leader crashed as it installs, the two
// leaders cut from each other, the node a step went through crashed
// right after it proposed. Every node of these runs holds both groups,
// so an install completes a replica's short log from another replica
// (replica.Fetch, the sim's fetch below), a stream the faults lose.
//
// The run's checks then hold across the move (every acknowledged write
// once, at its sequence; each session's log identical on its group's
// replicas, whole by verify; the history linearizable), and checkMove
// requires the move to have ended, activated and retired or aborted and
// unwound, once the faults stopped; the directory, the source's fence and
// the holders to say the same; and the session not left fenced.

// Virtual bounds of the mover.
const (
	moveStallMax    = 2 * time.Second
	moveRetireGrace = 200 * time.Millisecond
	// moveStreamLossPct is the share of the install's fetches the faults
	// lose.
	moveStreamLossPct = 20
)

// mover is the run's move, one step at a time.
type mover struct {
	session  string
	from, to uint64
	mv       replica.Move // as the meta group last answered it
	next     string       // the step to take next (below)
	attempt  int          // never reset, so a late answer to an earlier step is ignored
	advanced int64        // the virtual instant of the last step taken
	abortAt  string       // the step before which the operator aborts ("": never)
	aborted  bool
	done     bool
	end      replica.LogEnd // the source's end at its fence
}

// The mover's actions, in order; the abort's after them.
const (
	actProbe    = "probe"
	actBegin    = "begin"
	actCopied   = "copied"
	actFence    = "fence"
	actFenced   = "fenced"
	actInstall  = "install"
	actProven   = "proven"
	actActivate = "activate"
	actRetire   = "retire"
	actRetired  = "retired"
	actAbort    = "abort"
	actUnfence  = "unfence"
	actUnfenced = "unfenced"
	actDrop     = "drop"
	actUnwound  = "unwound"
)

func (w *World) startMover() {
	s := sessionName(0)
	from := replica.GroupOf(w.opt.Groups, tenant, s)
	to := node.MetaGroup + 1 + (from-node.MetaGroup)%uint64(w.opt.Groups)
	m := &mover{session: s, from: from, to: to, next: actProbe}
	if w.rng.IntN(4) == 0 {
		m.abortAt = []string{actCopied, actFence, actFenced, actInstall, actProven}[w.rng.IntN(5)]
	}
	w.mover = m
	w.after(time.Duration(300+w.rng.IntN(700))*time.Millisecond, func() { m.advanced = w.now; w.moveAttempt(m) })
}

// moveAttempt takes the mover's next step through some live node.
func (w *World) moveAttempt(m *mover) {
	if w.err != nil || m.done {
		return
	}
	if !m.aborted && m.next == m.abortAt {
		w.abortMove(m, "aborted by the operator")
	}
	if !m.aborted && m.mv.ID != 0 && w.now-m.advanced > int64(moveStallMax) && m.next != actActivate && m.next != actRetire && m.next != actRetired {
		w.abortMove(m, fmt.Sprintf("no step for %s", moveStallMax))
	}
	m.attempt++
	a, next := m.attempt, m.next
	live := func() bool { return m.attempt == a && m.next == next && !m.done }
	w.through(live, func() { w.moveAttempt(m) }, func(sn *simNode, retry func()) {
		group, data, err := w.moveCommand(m)
		if err != nil {
			w.fail("mover: %v", err)
			return
		}
		w.moveFaults(m, group, sn)
		w.proposeTaken(sn, group, data, live, retry, func(out replica.Outcome) { w.moveAnswered(m, out, retry) })
		if w.now < int64(w.opt.Chaos) && w.rng.IntN(20) == 0 {
			// The node the step went through crashes right after it
			// proposed: the step may commit with no answer.
			w.mix(21, sn.id)
			w.crash(sn)
			w.after(time.Duration(100+w.rng.IntN(400))*time.Millisecond, func() { w.restart(sn) })
		}
	})
}

// proposeTaken proposes data in group through sn and hands took what
// applying it at sn returned, while live; a proposal that failed retries.
func (w *World) proposeTaken(sn *simNode, group uint64, data []byte, live func() bool, retry func(), took func(replica.Outcome)) {
	sm := sn.sm
	sn.n.Propose(group, data, func(r node.ProposeResult) {
		if !live() {
			return
		}
		if r.Err != nil {
			retry()
			return
		}
		out, ok := sm.Take(group, r.Index)
		if !ok {
			w.fail("node %d has no outcome for entry %d of group %d", sn.id, r.Index, group)
			return
		}
		took(out)
	})
}

// abortMove turns the mover to the abort: the abort recorded, the source
// unfenced, the destination's copy dropped.
func (w *World) abortMove(m *mover, why string) {
	m.aborted, m.next = true, actAbort
	m.mv.Reason = why
	w.mix(22)
}

// moveCommand is the entry of the mover's next step and its group.
func (w *World) moveCommand(m *mover) (uint64, []byte, error) {
	data := func(method string, d replica.MoveDoc) ([]byte, error) {
		cmd, err := cluster.NewCommand(method, service.Call{Tenant: tenant, Session: m.session}, d, w.clock.Now(), 0)
		if err != nil {
			return nil, err
		}
		return cmd.Encode()
	}
	meta := func(s replica.MoveStep) (uint64, []byte, error) {
		s.Tenant, s.Session, s.Move = tenant, m.session, m.mv.ID
		b, err := json.Marshal(replica.MetaCommand{Op: replica.OpMoveStep, Move: &s, TS: w.now})
		return node.MetaGroup, b, err
	}
	id := m.mv.ID
	switch m.next {
	case actProbe:
		b, err := data(replica.MethodMoveProbe, replica.MoveDoc{})
		return m.from, b, err
	case actBegin:
		b, err := json.Marshal(replica.MetaCommand{Op: replica.OpMoveBegin, Move: &replica.MoveStep{Tenant: tenant, Session: m.session, To: m.to}, TS: w.now})
		return node.MetaGroup, b, err
	case actCopied:
		return meta(replica.MoveStep{Step: replica.MoveCopied, Bytes: uint64(m.end.Length)})
	case actFence:
		method := replica.MethodMoveFence
		if w.opt.moveSkipFence {
			method = replica.MethodMoveProbe
		}
		b, err := data(method, replica.MoveDoc{Move: id, To: m.to})
		return m.from, b, err
	case actFenced:
		return meta(replica.MoveStep{Step: replica.MoveFenced, Seq: m.end.Seq, Chain: m.end.Chain, Length: uint64(m.end.Length)})
	case actInstall:
		b, err := data(replica.MethodMoveInstall, replica.MoveDoc{Move: id, From: m.from, To: m.to, Seq: m.end.Seq, Chain: m.end.Chain, Length: m.end.Length})
		return m.to, b, err
	case actProven:
		return meta(replica.MoveStep{Step: replica.MoveProven, Seq: m.end.Seq, Chain: m.end.Chain, Length: uint64(m.end.Length)})
	case actActivate:
		return meta(replica.MoveStep{Step: replica.MoveActivated})
	case actRetire:
		b, err := data(replica.MethodMoveRetire, replica.MoveDoc{Move: id, To: m.to})
		return m.from, b, err
	case actRetired:
		return meta(replica.MoveStep{Step: replica.MoveRetired})
	case actAbort:
		return meta(replica.MoveStep{Step: replica.MoveAborted, Reason: m.mv.Reason})
	case actUnfence:
		b, err := data(replica.MethodMoveUnfence, replica.MoveDoc{Move: id})
		return m.from, b, err
	case actUnfenced:
		return meta(replica.MoveStep{Step: replica.MoveUnfenced})
	case actDrop:
		b, err := data(replica.MethodMoveDrop, replica.MoveDoc{Move: id, From: m.from})
		return m.to, b, err
	case actUnwound:
		return meta(replica.MoveStep{Step: replica.MoveUnwound})
	}
	return 0, nil, fmt.Errorf("no action %q", m.next)
}

// moveAnswered takes a step's outcome: the next step, a wait, or the end.
func (w *World) moveAnswered(m *mover, out replica.Outcome, retry func()) {
	step := m.next
	if r, ok := refuse.As(out.Err); ok && step == actProbe && r.Code == refuse.NotFound {
		retry() // the session has no record yet
		return
	}
	if out.Err != nil {
		w.fail("moving %s from group %d to group %d: %s: %v", m.session, m.from, m.to, step, out.Err)
		return
	}
	if mv, ok := out.Value.(replica.Move); ok {
		m.mv = mv
	}
	end, _ := out.Value.(replica.LogEnd)
	w.mix(23, uint64(len(step)), m.mv.ID)
	m.advanced = w.now
	then := time.Millisecond
	switch step {
	case actProbe:
		m.end, m.next = end, actBegin
	case actBegin:
		if m.mv.Step != replica.MoveBegun {
			w.fail("move begun: %+v", m.mv)
			return
		}
		m.next = actCopied
	case actCopied:
		m.next = actFence
	case actFence:
		m.end, m.next = end, actFenced
	case actFenced:
		m.next = actInstall
		if w.opt.moveSkipFence {
			then = 300 * time.Millisecond // writes the source takes meanwhile
		}
	case actInstall:
		if end != m.end {
			w.fail("move %d: the destination installed %+v, the source was fenced at %+v", m.mv.ID, end, m.end)
			return
		}
		m.next = actProven
	case actProven:
		m.next = actActivate
	case actActivate:
		m.next, then = actRetire, moveRetireGrace
		w.stats.MovesActivated++
	case actRetire:
		m.next = actRetired
	case actRetired, actUnwound:
		m.done = true
		return
	case actAbort:
		m.next = actUnfence
		w.stats.MovesAborted++
	case actUnfence:
		m.next = actUnfenced
	case actUnfenced:
		m.next = actDrop
	case actDrop:
		m.next = actUnwound
	}
	w.after(then, func() { w.moveAttempt(m) })
}

// moveFaults are the mover's own faults during the chaos, as a step goes
// out: the source's leader crashed as it fences, the destination's as it
// installs, the two groups' leaders cut from each other.
func (w *World) moveFaults(m *mover, group uint64, via *simNode) {
	if w.now >= int64(w.opt.Chaos) || w.rng.IntN(3) != 0 {
		return
	}
	leader := func(g uint64) *simNode {
		for _, sn := range w.upNodes() {
			if slices.ContainsFunc(sn.n.Leading(), func(gt node.GroupTerm) bool { return gt.Group == g }) {
				return sn
			}
		}
		return nil
	}
	switch l := leader(group); {
	case l == nil:
	case (m.next == actFence && group == m.from) || (m.next == actInstall && group == m.to):
		if l != via {
			w.mix(24, l.id)
			w.crash(l)
			w.after(time.Duration(100+w.rng.IntN(500))*time.Millisecond, func() { w.restart(l) })
		}
	default:
		src, dst := leader(m.from), leader(m.to)
		if src != nil && dst != nil && src != dst {
			w.stats.Partitions++
			w.mix(25, src.id, dst.id)
			w.blocked[[2]uint64{src.id, dst.id}] = true
			w.blocked[[2]uint64{dst.id, src.id}] = true
		}
	}
}

// fetch is the sim's replica.Fetch: the bytes from another live replica
// of the group that the network lets through, a stream the faults lose
// now and then.
func (w *World) fetch(sn *simNode) replica.Fetch {
	return func(_ context.Context, group uint64, tenant, session string, from, to int64, out io.Writer) error {
		if w.now < int64(w.opt.Chaos) && w.rng.IntN(100) < moveStreamLossPct {
			w.stats.MoveStreamsLost++
			return errors.New("sim: the stream was lost")
		}
		for _, o := range w.upNodes() {
			if o == sn || w.blocked[[2]uint64{o.id, sn.id}] {
				continue
			}
			var buf bytes.Buffer
			if err := o.sm.ReadLog(group, tenant, session, from, to, &buf); err != nil {
				continue
			}
			_, err := out.Write(buf.Bytes())
			return err
		}
		return errors.New("sim: no replica of the source reachable")
	}
}

// moving reports whether a client's command was refused as moving: the
// session is fenced for its move, and a node waits for the directory to
// name its new group.
func moving(err error) bool {
	var mv *replica.Moving
	return errors.As(err, &mv)
}

// readMoving serves a read of a session fenced in g for its move as a
// node does (cluster's readConsistent): the meta group's read index
// first, so that once the directory names the new group the read goes
// there, the destination having taken writes since; until then the
// source's replica answers, no write having been taken anywhere since its
// fence.
func (w *World) readMoving(c *client, sn *simNode, g uint64, live func() bool, retry func()) {
	sm := sn.sm
	sn.n.ReadIndex(node.MetaGroup, func(r node.ReadResult) {
		if !live() {
			return
		}
		if r.Err != nil || sm.GroupOf(tenant, c.op.Session) != g {
			w.stats.Moved++
			retry()
			return
		}
		ps, err := w.listPromises(sm, c.op.Session)
		if err != nil {
			w.fail("client %d: list %s at node %d: %v", c.id, c.op.Session, sn.id, err)
			return
		}
		w.stats.Reads++
		w.complete(c, model.LedgerOut{Promises: ps})
	})
}

// checkMove requires the move to have ended once the faults stopped, and
// the meta group's and the two groups' replicas to agree on how: retired
// (the directory names the destination at epoch 1, the source fences the
// session to it, the destination holds its log) or aborted and unwound
// (no placement, the source holding it unfenced).
func (w *World) checkMove(members map[uint64][]*simNode) error {
	m := w.mover
	if m == nil {
		return nil
	}
	if !m.done {
		return fmt.Errorf("the move of %s from group %d to group %d never ended after the faults healed (next %s, recorded %s)", m.session, m.from, m.to, m.next, m.mv.Step)
	}
	want := m.from
	if !m.aborted {
		want = m.to
	}
	for _, sn := range members[node.MetaGroup] {
		mvs := sn.sm.Moves()
		i := slices.IndexFunc(mvs, func(mv replica.Move) bool { return mv.ID == m.mv.ID })
		switch {
		case i < 0:
			return fmt.Errorf("node %d records no move %d", sn.id, m.mv.ID)
		case m.aborted && (mvs[i].Step != replica.MoveAborted || !mvs[i].Unfenced || !mvs[i].Unwound):
			return fmt.Errorf("node %d records the aborted move as %+v", sn.id, mvs[i])
		case !m.aborted && mvs[i].Step != replica.MoveRetired:
			return fmt.Errorf("node %d records the move as %+v", sn.id, mvs[i])
		}
		if g := sn.sm.GroupOf(tenant, m.session); g != want {
			return fmt.Errorf("node %d's directory routes %s to group %d, not %d", sn.id, m.session, g, want)
		}
		if e := sn.sm.EpochOf(tenant, m.session); e != map[bool]uint64{true: 0, false: 1}[m.aborted] {
			return fmt.Errorf("node %d has %s at epoch %d", sn.id, m.session, e)
		}
	}
	for _, sn := range members[m.from] {
		if to, fenced := sn.sm.MovingTo(m.from, tenant, m.session); fenced {
			return fmt.Errorf("node %d: %s is left fenced in group %d for group %d", sn.id, m.session, m.from, to)
		}
		if to, fenced := sn.sm.FencedTo(m.from, tenant, m.session); fenced != !m.aborted || (fenced && to != m.to) {
			return fmt.Errorf("node %d: %s fenced in group %d: %v (to %d) after the move %s", sn.id, m.session, m.from, fenced, to, map[bool]string{true: "aborted", false: "retired"}[m.aborted])
		}
	}
	for _, sn := range members[want] {
		if h := sn.sm.Holder(tenant, m.session); h != want {
			return fmt.Errorf("node %d holds %s for group %d, not %d", sn.id, m.session, h, want)
		}
	}
	return nil
}
