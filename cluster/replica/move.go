package replica

// Moving a session between data groups: the meta group's record of each
// move, one committed step at a time (decideMove, pure), and the
// directory's per-session epochs. A move is begun (its session, source,
// destination and the session's epoch when it was asked for), copied
// (the destination's nodes hold the source's log up to some length),
// fenced (the source refuses the session's writes, and names the last
// sequence and chain hash it holds), proven (the destination holds that
// sequence and chain hash), activated (the directory names the
// destination, at the next epoch) and retired (the source dropped its
// copy), or aborted before activation. Every step answers a repeat of
// itself as the first time, so whoever carries the move on after a crash
// proposes the step it finds next.

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/refuse"
)

// Meta operations of a move.
const (
	// OpMoveBegin records a move of a session to another group.
	OpMoveBegin = "move.begin"
	// OpMoveStep records a move's next step (or its abort).
	OpMoveStep = "move.step"
)

// The steps of a move, in order; aborted ends a move before activation.
// Stored: do not rename.
const (
	MoveBegun     = "begun"
	MoveCopied    = "copied"
	MoveFenced    = "fenced"
	MoveProven    = "proven"
	MoveActivated = "activated"
	MoveRetired   = "retired"
	MoveAborted   = "aborted"
	// After an abort: the source took the session's writes again
	// (unfenced), then the destination's copy went (unwound).
	MoveUnfenced = "unfenced"
	MoveUnwound  = "unwound"
)

// Refusal codes of a move's requests.
const (
	// CodeMoveStale: the move was asked for at an epoch of the session
	// that is no longer its epoch (it moved meanwhile).
	CodeMoveStale refuse.Code = "StaleEpoch"
)

// MovesKept bounds the ended moves the meta group remembers (the newest),
// for `tally cluster moves`.
const MovesKept = 64

// Move is a move as the meta group records it. Stored: do not rename.
type Move struct {
	ID      uint64 `json:"id"`
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	From    uint64 `json:"from"`
	To      uint64 `json:"to"`
	// Epoch is the session's epoch when the move began; activation makes
	// it Epoch+1.
	Epoch uint64 `json:"epoch"`
	Step  string `json:"step"`
	// Bytes is how much of the log the destination's nodes held before the
	// fence (the copy, before catch-up).
	Bytes uint64 `json:"bytes,omitempty"`
	// Seq, Chain and Length are where the source's log stood when it was
	// fenced: its last sequence, chain hash (hex) and length.
	Seq    uint64 `json:"seq,omitempty"`
	Chain  string `json:"chain,omitempty"`
	Length uint64 `json:"length,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Unfenced and Unwound follow an abort: the source serves the
	// session's writes again; the destination's copy is gone.
	Unfenced bool `json:"unfenced,omitempty"`
	Unwound  bool `json:"unwound,omitempty"`
	// The instants (Unix nanoseconds, the proposers' clocks) of its begin,
	// fence, activation and last step.
	Began     int64 `json:"began"`
	Fenced    int64 `json:"fenced,omitempty"`
	Activated int64 `json:"activated,omitempty"`
	Updated   int64 `json:"updated"`
}

// Name is the move's "tenant/session".
func (mv Move) Name() string { return mv.Tenant + "/" + mv.Session }

// Ended reports whether the move is over: retired or aborted.
func (mv Move) Ended() bool { return mv.Step == MoveRetired || mv.Step == MoveAborted }

// MoveStep is a move.begin's or move.step's document.
type MoveStep struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	// Move is the move a step is for, when its sender knows it (the
	// mover does): an aborted move's unfence and unwind can come after
	// another move of the same session began.
	Move uint64 `json:"move,omitempty"`
	// To and Epoch are a begin's: the destination, and the session's
	// epoch the request was decided at (refused if it moved since).
	To    uint64 `json:"to,omitempty"`
	Epoch uint64 `json:"epoch,omitempty"`
	// Step is a move.step's: the step reached.
	Step   string `json:"step,omitempty"`
	Bytes  uint64 `json:"bytes,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Chain  string `json:"chain,omitempty"`
	Length uint64 `json:"length,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (s MoveStep) name() string { return s.Tenant + "/" + s.Session }

// moveOrder is each step's rank: a step goes forward only.
var moveOrder = map[string]int{MoveBegun: 0, MoveCopied: 1, MoveFenced: 2, MoveProven: 3, MoveActivated: 4, MoveRetired: 5}

// directory is what a move decides over: the placements, the sessions'
// epochs, the moves. placements and epochs are those the move's decision
// changed, over dir (result sets them in it).
type directory struct {
	placements map[string]uint64
	epochs     map[string]uint64
	dir        *Directory
	moves      []Move
	// added is the data groups added after the bootstrap: a move may go
	// to one.
	added int
}

// groupOf is the session's group in d.
func (d directory) groupOf(groups int, tenant, session string) uint64 {
	if g, ok := d.placements[tenant+"/"+session]; ok {
		return g
	}
	if g, ok := d.dir.Group(tenant + "/" + session); ok {
		return g
	}
	return GroupOf(groups, tenant, session)
}

// active is the index of the session's move not yet ended, or -1.
func (d directory) active(name string) int {
	return slices.IndexFunc(d.moves, func(mv Move) bool { return mv.Name() == name && !mv.Ended() })
}

// decideMove decides a move.begin or move.step at instant ts, pure.
func decideMove(d directory, c MetaCommand, groups int) (directory, Outcome) {
	s := c.Move
	if s == nil {
		return d, Outcome{Err: refuse.Invalidf("move", "required: tenant and session")}
	}
	if c.Op == OpMoveBegin {
		return beginMove(d, *s, groups, c.TS)
	}
	return stepMove(d, *s, c.TS)
}

func beginMove(d directory, s MoveStep, groups int, ts int64) (directory, Outcome) {
	if err := CheckPlacement(Placement{Tenant: s.Tenant, Session: s.Session, Group: s.To}, groups+d.added); err != nil {
		return d, Outcome{Err: err}
	}
	name := s.name()
	from := d.groupOf(groups, s.Tenant, s.Session)
	if i := d.active(name); i >= 0 {
		mv := d.moves[i]
		if mv.To == s.To && mv.Epoch == s.Epoch {
			return d, Outcome{Value: mv} // the same request again
		}
		return d, Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s is moving already (move %d, from group %d to group %d, %s): let it end, or abort it (tally cluster move %s --abort)", name, mv.ID, mv.From, mv.To, mv.Step, name))}
	}
	if s.Epoch != d.epoch(name) {
		return d, Outcome{Err: refuse.New(CodeMoveStale, "epoch", fmt.Sprintf("the move of %s was asked for at its epoch %d; it is at epoch %d now (it moved since): ask again", name, s.Epoch, d.epoch(name)))}
	}
	if from == s.To {
		return d, Outcome{Err: refuse.Conflictf("group", fmt.Sprintf("session %s is in group %d already", name, s.To))}
	}
	for _, mv := range d.moves {
		if mv.Name() == name && mv.Step == MoveAborted && !mv.Unwound && mv.To == s.To {
			return d, Outcome{Err: refuse.Conflictf("group", fmt.Sprintf("move %d of %s to group %d was aborted and its copy there is not dropped yet: retry once it is (tally cluster moves)", mv.ID, name, s.To))}
		}
	}
	var id uint64
	for _, mv := range d.moves {
		id = max(id, mv.ID)
	}
	mv := Move{ID: id + 1, Tenant: s.Tenant, Session: s.Session, From: from, To: s.To, Epoch: s.Epoch, Step: MoveBegun, Began: ts, Updated: ts}
	d.moves = append(slices.Clone(d.moves), mv)
	return d, Outcome{Value: mv}
}

func stepMove(d directory, s MoveStep, ts int64) (directory, Outcome) {
	name := s.name()
	i := d.active(name)
	if i >= 0 && s.Move != 0 && d.moves[i].ID != s.Move {
		i = -1 // a step of an earlier move of the session
	}
	if i < 0 {
		// The step of a move that ended: a repeat of its last step answers
		// it; anything else finds no move.
		for j := len(d.moves) - 1; j >= 0; j-- {
			if mv := d.moves[j]; mv.Name() == name && (s.Move == 0 || mv.ID == s.Move) {
				if mv.Step == s.Step {
					return d, Outcome{Value: mv}
				}
				if mv.Step == MoveAborted && (s.Step == MoveUnfenced || s.Step == MoveUnwound) {
					mv.Unfenced = true
					mv.Unwound = mv.Unwound || s.Step == MoveUnwound
					return d.with(j, mv, ts), Outcome{Value: mv}
				}
				if s.Step == MoveAborted && mv.Step == MoveRetired {
					return d, Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("move %d of %s was activated: there is no abort after activation (moving back is another move)", mv.ID, name))}
				}
				break
			}
		}
		return d, Outcome{Err: refuse.NotFoundf("session", fmt.Sprintf("no move of %s is in progress", name))}
	}
	mv := d.moves[i]
	if s.Step == MoveAborted {
		if moveOrder[mv.Step] >= moveOrder[MoveActivated] {
			return d, Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("move %d of %s was activated: there is no abort after activation (moving back is another move)", mv.ID, name))}
		}
		mv.Step, mv.Reason = MoveAborted, s.Reason
		return d.with(i, mv, ts), Outcome{Value: mv}
	}
	next, ok := moveOrder[s.Step]
	if !ok || s.Step == MoveBegun {
		return d, Outcome{Err: refuse.Invalidf("step", fmt.Sprintf("%q is not a step of a move: copied, fenced, proven, activated, retired or aborted", s.Step))}
	}
	cur := moveOrder[mv.Step]
	switch {
	case next < cur || (next == cur && s.Step != MoveCopied):
		return d, Outcome{Value: mv} // a repeat, or a step overtaken
	case s.Step == MoveCopied && cur == moveOrder[MoveCopied] && s.Bytes <= mv.Bytes:
		return d, Outcome{Value: mv}
	case next > cur+1 && !(s.Step == MoveFenced && mv.Step == MoveBegun):
		return d, Outcome{Err: refuse.Conflictf("step", fmt.Sprintf("move %d of %s is %s: it cannot be %s next", mv.ID, name, mv.Step, s.Step))}
	}
	switch s.Step {
	case MoveCopied:
		mv.Bytes = s.Bytes
	case MoveFenced:
		mv.Seq, mv.Chain, mv.Length, mv.Fenced = s.Seq, s.Chain, s.Length, ts
	case MoveProven:
		if s.Seq != mv.Seq || s.Chain != mv.Chain || s.Length != mv.Length {
			return d, Outcome{Err: refuse.Conflictf("chain", fmt.Sprintf("group %d holds %s at sequence %d, chain %s, %d bytes; the source was fenced at sequence %d, chain %s, %d bytes", mv.To, name, s.Seq, s.Chain, s.Length, mv.Seq, mv.Chain, mv.Length))}
		}
	case MoveActivated:
		pl := cloneMap(d.placements)
		pl[name] = mv.To
		ep := cloneMap(d.epochs)
		ep[name] = mv.Epoch + 1
		d.placements, d.epochs = pl, ep
		mv.Activated = ts
	}
	mv.Step = s.Step
	return d.with(i, mv, ts), Outcome{Value: mv}
}

// with is d with move i replaced by mv at instant ts, the ended moves
// past MovesKept dropped, oldest first.
func (d directory) with(i int, mv Move, ts int64) directory {
	mv.Updated = ts
	moves := slices.Clone(d.moves)
	moves[i] = mv
	ended := 0
	for _, m := range moves {
		if m.Ended() {
			ended++
		}
	}
	for j := 0; j < len(moves) && ended > MovesKept; {
		if moves[j].Ended() {
			moves = slices.Delete(moves, j, j+1)
			ended--
			continue
		}
		j++
	}
	d.moves = moves
	return d
}

func cloneMap(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Moves are the moves the meta group records, as this replica has
// applied it: those in progress and the newest ended, in the order they
// began.
func (m *metaSM) Moves() []Move {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.moves)
}

// EpochOf is the session's epoch in the directory, as this replica has
// applied it: how many times its group changed.
func (m *metaSM) EpochOf(tenant, session string) uint64 {
	return m.Directory().Epoch(tenant + "/" + session)
}

// Keys of the meta group's moves: the sessions' epochs, one key each
// followed by the session's name, and the moves, whole (they are few).
// Stored: do not rename.
const (
	kindEpoch = 'e'
	kindMoves = 'v'
)

// epochRecord is a session's epoch's value. Stored: do not rename.
type epochRecord struct {
	Epoch uint64 `json:"epoch"`
}

// writeMoves writes the epochs that changed from old and the moves into b.
func writeMoves(b *pebble.Batch, _ map[string]uint64, old, epochs map[string]uint64, moves []Move) error {
	for name, e := range epochs {
		if o, ok := old[name]; ok && o == e {
			continue
		}
		if err := setJSON(b, nameKey(node.MetaGroup, kindEpoch, name), epochRecord{Epoch: e}); err != nil {
			return err
		}
	}
	return setJSON(b, gkey(node.MetaGroup, kindMoves), moves)
}

// loadMoves reads the sessions' epochs and the moves.
func (m *metaSM) loadMoves() (map[string]uint64, []Move, error) {
	epochs := map[string]uint64{}
	err := m.scan(gkey(node.MetaGroup, kindEpoch), func(name string, v []byte) error {
		var r epochRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("replica: epoch of %q: %w", name, err)
		}
		epochs[name] = r.Epoch
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var moves []Move
	if _, err := m.get(gkey(node.MetaGroup, kindMoves), &moves); err != nil {
		return nil, nil, err
	}
	return epochs, moves, nil
}
