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
	"context"
	"time"

	"tally/cluster/node"
	"tally/cluster/replica"
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
