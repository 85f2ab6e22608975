package cluster

// Moving a session to another data group (tally cluster move). The
// operator's signed request commits the move's begin in the meta group
// (replica.OpMoveBegin); the mover, which runs on the meta group's leader,
// then carries each move from the step the meta group records, so a
// crash of any node, of the mover or of the client leaves a move that the
// next mover completes or aborts:
//
//   - copy: each node of the destination group stages the source's log up
//     to where it stood at a probe, fetched from a source replica over the
//     move-fetch route and verified line by line (Stage); rounds of it
//     catch up with what the source committed meanwhile;
//   - fence: the source group refuses the session's writes (503 Moving)
//     and names where its log ends; the nodes stage that tail;
//   - install and proof: the destination group commits the install of the
//     log up to that sequence and chain hash, and its replicas hold it
//     (completing a short copy themselves); the answer is the proof;
//   - activate: the directory names the destination at the next epoch;
//   - retire: after MoveRetireGrace the source refuses the session as
//     moved, and its nodes that hold it for the source alone drop it.
//
// Before activation a move is aborted by the operator (--abort) or by the
// mover when it made no progress for MoveStallMax (the destination
// unreachable, the copy not converging): the source is unfenced, the
// destination's copy dropped, and the session never left its source.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/sessionname"
)

// The move routes: the operator's move and list, and the nodes' own
// stage, fetch and command, all signed with the join secret.
const (
	MovePath        = "/v1/cluster/move"
	MovesPath       = "/v1/cluster/moves"
	MoveStagePath   = "/v1/cluster/move-stage"
	MoveFetchPath   = "/v1/cluster/move-fetch"
	MoveCommandPath = "/v1/cluster/move-command"
)

// Named bounds of a move.
const (
	// MoveStallMax: a move before activation that made no step for this
	// long is aborted (its destination unreachable, its copy not
	// converging).
	MoveStallMax = 10 * time.Second
	// MoveRetireGrace: the source keeps its copy this long after
	// activation (a node still routing by the old directory is refused
	// Moving there meanwhile, and follows the session).
	MoveRetireGrace = 2 * time.Second
	// moveCatchUpRounds bounds the copy's rounds before the fence;
	// moveCatchUpSlack is the tail short enough to fence over.
	moveCatchUpRounds = 4
	moveCatchUpSlack  = 256 << 10
	// moveEvery is how often the mover looks for moves to carry on.
	moveEvery = 200 * time.Millisecond
	// moveStepTimeout bounds one step's proposals and calls; a copy round
	// is bounded by moveCopyTimeout (the first round copies the whole log).
	moveStepTimeout = 20 * time.Second
	moveCopyTimeout = 10 * time.Minute
)

// MoveRequest asks for a session's move to a data group, or the abort of
// its move in progress.
type MoveRequest struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Group   uint64 `json:"group,omitempty"`
	Abort   bool   `json:"abort,omitempty"`
	Signed
}

func (r *MoveRequest) envelope() (string, *Signed, []any) {
	return "move", &r.Signed, []any{r.Tenant, r.Session, r.Group, r.Abort}
}

// SignMoves makes a moves request for the node to, signed at at.
func SignMoves(secret string, to Target, at time.Time) SignedAt {
	return signAt(secret, "moves", to, at)
}

// Moves is the meta group's moves as a node answers them.
type Moves struct {
	SchemaVersion int            `json:"schema_version"`
	Moves         []replica.Move `json:"moves"`
}

// moveStageRequest asks a node to stage a moving session's log up to a
// length, from a replica of the source group.
type moveStageRequest struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	From    uint64 `json:"from"`
	Upto    int64  `json:"upto"`
	Signed
}

func (r *moveStageRequest) envelope() (string, *Signed, []any) {
	return "move-stage", &r.Signed, []any{r.Tenant, r.Session, r.From, r.Upto}
}

// MoveFetchRequest asks a node for bytes of a session's log as its
// replica of a group holds them (a node's request to another, signed with
// the join secret; MoveFetchPath).
type MoveFetchRequest struct {
	Group   uint64 `json:"group"`
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	From    int64  `json:"from"`
	To      int64  `json:"to"`
	Signed
}

func (r *MoveFetchRequest) envelope() (string, *Signed, []any) {
	return "move-fetch", &r.Signed, []any{r.Group, r.Tenant, r.Session, r.From, r.To}
}

// moveCommandRequest asks a node that holds a group to propose a move's
// command there (the mover does not hold every group).
type moveCommandRequest struct {
	Group   uint64          `json:"group"`
	Command json.RawMessage `json:"command"`
	Signed
}

func (r *moveCommandRequest) envelope() (string, *Signed, []any) {
	return "move-command", &r.Signed, []any{r.Group, string(r.Command)}
}

// OpMove begins a move, or aborts one, and answers the move's record.
func (c *Node) OpMove(ctx context.Context, decode Decode) (any, error) {
	var req MoveRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, moveStepTimeout)
	defer cancel()
	if err := c.spendNonce(ctx, &req.Signed); err != nil {
		return nil, refusal(err)
	}
	mv, err := c.Move(ctx, req.Tenant, req.Session, req.Group, req.Abort)
	if err != nil {
		return nil, refusal(err)
	}
	return mv, nil
}

// Move begins the move of a session to group, or aborts its move.
func (c *Node) Move(ctx context.Context, tenant, session string, group uint64, abort bool) (replica.Move, error) {
	for _, f := range []struct{ field, name string }{{"tenant", tenant}, {"session", session}} {
		if err := sessionname.Check(f.field, f.name); err != nil {
			return replica.Move{}, err
		}
	}
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return replica.Move{}, err
	}
	if abort {
		out, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpMoveStep, Move: &replica.MoveStep{Tenant: tenant, Session: session, Step: replica.MoveAborted, Reason: "aborted by the operator"}})
		if err != nil {
			return replica.Move{}, err
		}
		mv, _ := out.Value.(replica.Move)
		c.log.Info("move aborted", "move", mv.ID, "session", mv.Name())
		return mv, nil
	}
	if err := replica.CheckPlacement(replica.Placement{Tenant: tenant, Session: session, Group: group}, c.sm.DataGroups()); err != nil {
		return replica.Move{}, err
	}
	epoch := c.sm.EpochOf(tenant, session)
	from := c.sm.GroupOf(tenant, session)
	if from != group {
		// The session must exist, with records, in its group.
		if _, err := c.moveCommand(ctx, from, replica.MethodMoveProbe, tenant, session, replica.MoveDoc{}); err != nil {
			return replica.Move{}, err
		}
	}
	out, err := c.proposeMeta(ctx, replica.MetaCommand{Op: replica.OpMoveBegin, Move: &replica.MoveStep{Tenant: tenant, Session: session, To: group, Epoch: epoch}})
	if err != nil {
		return replica.Move{}, err
	}
	mv, _ := out.Value.(replica.Move)
	c.log.Info("move begun", "move", mv.ID, "session", mv.Name(), "from", mv.From, "to", mv.To)
	return mv, nil
}

// OpMoves lists the moves in progress and the recent ones.
func (c *Node) OpMoves(ctx context.Context, decode Decode) (any, error) {
	if err := c.decodeSigned(decode, &SignedAt{what: "moves"}); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.readIndex(ctx, node.MetaGroup); err != nil {
		return nil, refusal(err)
	}
	return Moves{SchemaVersion: 1, Moves: c.movesOrEmpty()}, nil
}

func (c *Node) movesOrEmpty() []replica.Move {
	mvs := c.sm.Moves()
	if mvs == nil {
		mvs = []replica.Move{}
	}
	return mvs
}

// OpMoveStage stages a moving session's log on this node.
func (c *Node) OpMoveStage(ctx context.Context, decode Decode) (any, error) {
	var req moveStageRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	if req.Upto < 0 {
		if err := c.sm.Unstage(req.Tenant, req.Session); err != nil {
			return nil, err
		}
		return replica.LogEnd{}, nil
	}
	end, err := c.sm.Stage(ctx, req.Tenant, req.Session, req.From, req.Upto)
	if err != nil {
		return nil, refusal(err)
	}
	return end, nil
}

// OpMoveCommand proposes a move's command in a group this node holds.
func (c *Node) OpMoveCommand(ctx context.Context, decode Decode) (any, error) {
	var req moveCommandRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, moveStepTimeout)
	defer cancel()
	cmd, err := replica.DecodeCommand(req.Command)
	if err != nil || !moveMethod(cmd.Method) {
		return nil, refusal(refuse.Invalidf("command", "a move's command"))
	}
	out, err := c.propose(ctx, req.Group, req.Command)
	if err == nil {
		err = out.Err
	}
	if err != nil {
		return nil, refusal(err)
	}
	end, _ := out.Value.(replica.LogEnd)
	return end, nil
}

func moveMethod(m string) bool {
	switch m {
	case replica.MethodMoveProbe, replica.MethodMoveFence, replica.MethodMoveUnfence, replica.MethodMoveInstall, replica.MethodMoveDrop, replica.MethodMoveRetire:
		return true
	}
	return false
}

// OpMoveFetch writes bytes of a session's log as this node's replica of
// a group holds them.
func (c *Node) OpMoveFetch(ctx context.Context, decode Decode, w io.Writer) error {
	var req MoveFetchRequest
	if err := c.decodeSigned(decode, &req); err != nil {
		return err
	}
	if err := c.sm.ReadLog(req.Group, req.Tenant, req.Session, req.From, req.To, w); err != nil {
		return refusal(err)
	}
	return nil
}

// moveCommand commits a move's command in group, here if this node holds
// the group, else at a node that does.
func (c *Node) moveCommand(ctx context.Context, group uint64, method, tenant, session string, d replica.MoveDoc) (replica.LogEnd, error) {
	cmd, err := NewCommand(method, service.Call{Tenant: tenant, Session: session}, d, time.Now(), 0)
	if err != nil {
		return replica.LogEnd{}, err
	}
	data, err := cmd.Encode()
	if err != nil {
		return replica.LogEnd{}, err
	}
	if c.placedHere(group) == nil {
		out, err := c.propose(ctx, group, data)
		if err == nil {
			err = out.Err
		}
		if err != nil {
			return replica.LogEnd{}, err
		}
		end, _ := out.Value.(replica.LogEnd)
		return end, nil
	}
	var last error = fmt.Errorf("no node of group %d is known", group)
	for _, id := range c.groupNodes(group) {
		var end replica.LogEnd
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, moveCommandRequest{Group: group, Command: data})
		if last = c.callNode(ctx, id, MoveCommandPath, &req, &end); last == nil {
			return end, nil
		}
		var ref *rest.Refusal
		if errors.As(last, &ref) && ref.Status != http.StatusServiceUnavailable {
			return replica.LogEnd{}, last // decided: a refusal of the command
		}
	}
	return replica.LogEnd{}, last
}

// groupNodes are the nodes that hold group, other than this one: its
// recorded voters and learners, or every member when no factor is set.
func (c *Node) groupNodes(group uint64) []uint64 {
	var ids []uint64
	if conf, ok := c.sm.Policy().Groups[group]; ok && len(conf.Voters) > 0 {
		if conf.Leader != 0 && slices.Contains(conf.Voters, conf.Leader) {
			ids = append(ids, conf.Leader)
		}
		for _, id := range append(slices.Clone(conf.Voters), conf.Learners...) {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	} else {
		for _, m := range c.sm.Members() {
			ids = append(ids, m.ID)
		}
	}
	return slices.DeleteFunc(ids, func(id uint64) bool { return id == c.cfg.NodeID })
}

// callNode posts a signed request to a member and decodes its answer
// into out; a refusal is returned as a *rest.Refusal.
func (c *Node) callNode(ctx context.Context, id uint64, path string, req any, out any) error {
	resp, err := c.postNode(ctx, id, path, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(out)
}

// postNode posts a signed request to a member; an answer other than 200
// is returned as its refusal.
func (c *Node) postNode(ctx context.Context, id uint64, path string, req any) (*http.Response, error) {
	m, ok := c.sm.Member(id)
	if !ok || m.Addr == "" {
		return nil, fmt.Errorf("node %d has no address", id)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, baseURL(m.Addr)+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return nil, fmt.Errorf("node %d: %w", id, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		var doc struct {
			Code  string `json:"code"`
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &doc)
		return nil, rest.NewRefusal(resp.StatusCode, doc.Code, fmt.Sprintf("node %d: %s", id, firstOf(doc.Error, string(b))))
	}
	return resp, nil
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// fetchLog is the replica's Fetch: the bytes [from, to) of a session's
// log from a node that holds group, the first that has them.
func (c *Node) fetchLog(ctx context.Context, group uint64, tenant, session string, from, to int64, w io.Writer) error {
	var last error = fmt.Errorf("no other node holds group %d", group)
	cw := &countingWriter{w: w}
	for _, id := range c.groupNodes(group) {
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, MoveFetchRequest{Group: group, Tenant: tenant, Session: session, From: from + cw.n, To: to})
		resp, err := c.postNode(ctx, id, MoveFetchPath, &req)
		if err != nil {
			last = err
			continue
		}
		_, err = io.Copy(cw, resp.Body)
		resp.Body.Close()
		if err == nil && from+cw.n == to {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("node %d sent %d bytes of %d", id, cw.n, to-from)
		}
		last = err
		var verr interface{ Unwrap() error }
		if errors.As(err, &verr) && cw.bad {
			return err // a line that does not continue the chain
		}
	}
	return last
}

// countingWriter counts what w took, and notes a refusal of it.
type countingWriter struct {
	w   io.Writer
	n   int64
	bad bool
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err != nil {
		c.bad = true
	}
	return n, err
}

// stageAll has every node of the destination group stage the session's
// log up to upto, and returns the least any of them holds.
func (c *Node) stageAll(ctx context.Context, mv replica.Move, upto int64) (int64, error) {
	least := upto
	nodes := c.groupNodes(mv.To)
	if c.placedHere(mv.To) == nil {
		end, err := c.sm.Stage(ctx, mv.Tenant, mv.Session, mv.From, upto)
		if err != nil {
			return 0, fmt.Errorf("stage at node %d: %w", c.cfg.NodeID, err)
		}
		least = min(least, end.Length)
	}
	for _, id := range nodes {
		var end replica.LogEnd
		req := Sign(c.cfg.Secret, Target{ClusterID: c.id.ClusterID, NodeID: id}, moveStageRequest{Tenant: mv.Tenant, Session: mv.Session, From: mv.From, Upto: upto})
		if err := c.callNode(ctx, id, MoveStagePath, &req, &end); err != nil {
			return 0, fmt.Errorf("stage at node %d: %w", id, err)
		}
		least = min(least, end.Length)
	}
	return least, nil
}

// mover carries the meta group's moves on while this node leads it.
func (c *Node) mover(ctx context.Context) {
	var mu sync.Mutex
	running := map[uint64]bool{}
	t := time.NewTicker(moveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !c.leading(ctx)[node.MetaGroup] {
			continue
		}
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
	}
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
