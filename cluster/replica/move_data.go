package replica

// A move's commands in the two data groups. In the source group:
// MoveProbe (where the session's log stands), MoveFence (the source
// refuses the session's writes from then on, 503 Moving, and names where
// its log stands: every command of the session it applied is before it),
// MoveUnfence (an abort: the session writes there again) and MoveRetire
// (after activation: the source refuses the session as moved, and a
// replica that holds the session for the source alone drops its copy).
// In the destination group: MoveInstall (every replica holds the source's
// log up to the fenced sequence and chain hash: the copy its node staged
// before, completed from a source replica if short, verified line by line,
// or, on a node that holds both groups, the very log the source wrote)
// and MoveDrop (an abort after the install: the copy goes, or returns to
// the source on a node that holds both).
//
// A node keeps one directory of sessions for all its groups, so which
// group's a session's log is on a node is its held record (place.go): the
// install moves it to the destination, the drop back. A source group does
// not run a command of a session another group holds on the node: that
// is a command before the fence that a lagging replica applies after the
// install took the log with it (its lines are in the log already).

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"tally/api"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/store"
)

// A move's commands in the data groups. Stored in the raft log: do not
// rename.
const (
	MethodMoveProbe   = "MoveProbe"
	MethodMoveFence   = "MoveFence"
	MethodMoveUnfence = "MoveUnfence"
	MethodMoveInstall = "MoveInstall"
	MethodMoveDrop    = "MoveDrop"
	MethodMoveRetire  = "MoveRetire"
)

// isMoveMethod reports a move's command: it writes no session's log
// through the Service.
func isMoveMethod(m string) bool {
	switch m {
	case MethodMoveProbe, MethodMoveFence, MethodMoveUnfence, MethodMoveInstall, MethodMoveDrop, MethodMoveRetire:
		return true
	}
	return false
}

// Keys of a data group's moves, each followed by a session's name.
// Stored: do not rename.
const (
	kindMoving = 'x' // source: the session is fenced for its move to the group named
	kindMoveIn = 'y' // destination: the session was installed from the group named
	// A move of the session ended in the group: the source unfenced it
	// after an abort, or the destination dropped its copy. A late fence
	// or install of that move, a duplicate raft took after the end, is
	// refused rather than fence or take the session again.
	kindMoveEnded = 'q'
)

// moveEnded is a kindMoveEnded record's value: the move. Stored: do not
// rename.
type moveEnded struct {
	Move uint64 `json:"move"`
	// Length is the session's log's length here when the source
	// unfenced it.
	Length int64 `json:"length,omitempty"`
}

// MoveDoc is a move command's document: the move's groups and, for an
// install, where the source's log stood when it was fenced.
type MoveDoc struct {
	Move   uint64 `json:"move"`
	From   uint64 `json:"from,omitempty"`
	To     uint64 `json:"to,omitempty"`
	Seq    uint64 `json:"seq,omitempty"`
	Chain  string `json:"chain,omitempty"`
	Length int64  `json:"length,omitempty"`
	// Holders are an install's: the source group's voters, which hold
	// verified copies of the bytes the session's records name; the
	// destination records that content as held by them, and each of its
	// nodes fetches its copy (custody).
	Holders []uint64 `json:"holders,omitempty"`
}

// LogEnd is where a session's log stands in a group: its last sequence,
// chain hash (hex) and length.
type LogEnd struct {
	Seq    uint64 `json:"seq"`
	Chain  string `json:"chain"`
	Length int64  `json:"length"`
}

func logEnd(p store.Position) LogEnd {
	return LogEnd{Seq: p.Seq, Chain: hex.EncodeToString(p.Hash[:]), Length: p.Offset}
}

// moveIn is a destination's record of an install. Stored: do not rename.
type moveIn struct {
	From uint64 `json:"from"`
	// Move is the move installed (0 in records written before it was
	// kept).
	Move uint64 `json:"move,omitempty"`
	// Shared: the node holds the source group too, and the install took
	// the source's log as it was.
	Shared bool `json:"shared,omitempty"`
}

// Moving refuses a write of a session its group has fenced for a move:
// retryable (503 Moving, Retry-After); the session's reads are served.
type Moving struct {
	Session  string
	From, To uint64
}

func (e *Moving) Error() string {
	return fmt.Sprintf("session %s is moving from group %d to group %d: its writes resume once the move is activated or aborted: retry", e.Session, e.From, e.To)
}

// Refusal is 503 Moving with Retry-After, naming both groups.
func (e *Moving) Refusal() *rest.Refusal {
	return rest.NewRetryable(service.CodeMoving, e.Error(), api.M("group", api.U(e.From)), api.M("to_group", api.U(e.To)))
}

// Fetch streams the bytes [from, to) of a session's log from a replica of
// group (other than this node's) into w: how a destination's node gets
// the source's log. The cluster provides it (Config.Fetch).
type Fetch func(ctx context.Context, group uint64, tenant, session string, from, to int64, w io.Writer) error

// FetchTimeout bounds the fetch an install makes in the apply loop when
// its node's staged copy is short of the fenced end (normally a tail of
// a few lines: the mover stages before it fences).
const FetchTimeout = 30 * time.Second

// errMoveCopy marks a failure of this node's copy of a moving session at
// its install (a fetch that failed, a copy that does not end where the
// source was fenced): the replica's own, never a refusal, so the node
// stops rather than decide differently from the others, and applies the
// install again when it starts.
var errMoveCopy = fmt.Errorf("%w: a moving session's copy", errLocalCopy)

// batchMove is a data group batch's move records, written with its
// applied index.
type batchMove struct {
	moving   map[string]uint64 // set
	unmoving map[string]bool
	unfence  map[string]bool
	setHeld  map[string]uint64 // name → group
	dropHeld map[string]uint64 // name → group
	ins      map[string]*moveIn
	ended    map[string]moveEnded // name → the move that ended in the batch's group
}

func newBatchMove() *batchMove {
	return &batchMove{moving: map[string]uint64{}, unmoving: map[string]bool{}, unfence: map[string]bool{},
		setHeld: map[string]uint64{}, dropHeld: map[string]uint64{}, ins: map[string]*moveIn{}, ended: map[string]moveEnded{}}
}

func (b *batchMove) empty() bool {
	return len(b.moving)+len(b.unmoving)+len(b.unfence)+len(b.setHeld)+len(b.dropHeld)+len(b.ins)+len(b.ended) == 0
}

// record writes the batch's move records into pb.
func (b *batchMove) record(group uint64, pb *pebble.Batch) error {
	for name, to := range b.moving {
		if err := setJSON(pb, nameKey(group, kindMoving, name), groupRecord{Group: to}); err != nil {
			return err
		}
	}
	for name := range b.unmoving {
		if err := pb.Delete(nameKey(group, kindMoving, name), nil); err != nil {
			return err
		}
	}
	for name := range b.unfence {
		if err := pb.Delete(nameKey(group, kindFence, name), nil); err != nil {
			return err
		}
	}
	for name, g := range b.dropHeld {
		if err := pb.Delete(nameKey(g, kindHeld, name), nil); err != nil {
			return err
		}
	}
	for name, g := range b.setHeld {
		if err := setJSON(pb, nameKey(g, kindHeld, name), heldRecord{}); err != nil {
			return err
		}
	}
	for name, e := range b.ended {
		if err := setJSON(pb, nameKey(group, kindMoveEnded, name), e); err != nil {
			return err
		}
	}
	for name, in := range b.ins {
		var err error
		if in == nil {
			err = pb.Delete(nameKey(group, kindMoveIn, name), nil)
		} else {
			err = setJSON(pb, nameKey(group, kindMoveIn, name), in)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// moveDone makes a committed batch's move records the replica's; mu is
// held.
func (m *dataSM) moveDoneLocked(group uint64, b *batchMove) {
	if m.moving[group] == nil {
		m.moving[group] = map[string]uint64{}
	}
	maps.Copy(m.moving[group], b.moving)
	for name := range b.unmoving {
		delete(m.moving[group], name)
	}
	for name := range b.unfence {
		delete(m.fences[group], name)
	}
	for name, g := range b.dropHeld {
		if m.held[name] == g {
			delete(m.held, name)
		}
	}
	maps.Copy(m.held, b.setHeld)
}

// loadMoving reads a data group's move fences.
func (m *dataSM) loadMoving(group uint64) error {
	if m.moving == nil {
		m.moving = map[uint64]map[string]uint64{}
	}
	var err error
	m.moving[group], err = m.scanGroups(gkey(group, kindMoving))
	return err
}

// MovingTo reports whether group has fenced the session for a move as
// this replica has applied it, and where to.
func (m *dataSM) MovingTo(group uint64, tenant, session string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.moving[group][tenant+"/"+session]
	return g, ok
}

// groupMoving is a data group's move fences as applied, for its snapshot.
func (m *dataSM) groupMoving(group uint64) map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.moving[group])
}

// restoreMoving replaces a data group's move fences with a snapshot's,
// in pb and the batch that records the install.
func (m *dataSM) restoreMoving(group uint64, pb *pebble.Batch, b *batchPlace, moving map[string]uint64) error {
	if err := pb.DeleteRange(gkey(group, kindMoving), gkey(group, kindMoving+1), nil); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.moving, group)
	m.mu.Unlock()
	maps.Copy(b.move.moving, moving)
	return nil
}

// movingTo is the session's move fence in the batch's group, the batch's
// own included.
func (m *dataSM) movingTo(b *batchPlace, name string) (uint64, bool) {
	if b.move.unmoving[name] {
		return 0, false
	}
	if g, ok := b.move.moving[name]; ok {
		return g, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.moving[b.group][name]
	return g, ok
}

// heldHere is the group that holds the session on this replica, the
// batch's changes included, and whether a record says so.
func (m *dataSM) heldHere(b *batchPlace, name string) (uint64, bool) {
	if b.held[name] {
		return b.group, true
	}
	if g, ok := b.move.setHeld[name]; ok {
		return g, true
	}
	if _, ok := b.move.dropHeld[name]; ok {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.held[name]
	return g, ok
}

// moveEntry runs a move's command, or refuses a write of a session fenced
// for a move or held here by another group; it reports false for any
// other command, which runs as it would.
func (m *dataSM) moveEntry(b *batchPlace, c Command) (Outcome, bool) {
	name := c.Tenant + "/" + c.Session
	if !isMoveMethod(c.Method) {
		if c.Method == MethodStage || c.Method == MethodUnstage || c.Method == MethodReceipt || c.Method == MethodFence {
			return Outcome{}, false
		}
		if to, ok := m.movingTo(b, name); ok {
			return Outcome{Err: &Moving{Session: name, From: b.group, To: to}}, true
		}
		if g, ok := m.heldHere(b, name); ok && g != b.group {
			return Outcome{Err: &Moved{Session: name, From: b.group, Group: g}}, true
		}
		return Outcome{}, false
	}
	var d MoveDoc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return Outcome{Err: refuse.Invalidf("command", "a move command's document: "+err.Error())}, true
	}
	// The group may be one added after the bootstrap (MaxDataGroups).
	if err := CheckPlacement(Placement{Tenant: c.Tenant, Session: c.Session, Group: b.group}, MaxDataGroups); err != nil {
		return Outcome{Err: err}, true
	}
	switch c.Method {
	case MethodMoveProbe, MethodMoveFence:
		return m.moveFence(b, c, d), true
	case MethodMoveUnfence:
		return m.moveUnfence(b, c, d), true
	case MethodMoveInstall:
		return m.moveInstall(b, c, d), true
	case MethodMoveDrop:
		return m.moveDrop(b, c, d), true
	default: // MethodMoveRetire
		return m.moveRetire(b, c, d), true
	}
}

// moveFence answers where the session's log stands in the source group,
// and for a fence fences it there.
func (m *dataSM) moveFence(b *batchPlace, c Command, d MoveDoc) Outcome {
	name := c.Tenant + "/" + c.Session
	if to, ok := m.fencedTo(b, name); ok {
		return Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s is placed in group %d, not group %d", name, to, b.group))}
	}
	if g, ok := m.heldHere(b, name); ok && g != b.group && (c.Method != MethodMoveFence || g != d.To) {
		// (A fence this replica applies after its node's install took the
		// log to the destination is decided as the others decide it: the
		// log is at the same end.)
		return Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s is in group %d, not group %d", name, g, b.group))}
	}
	pos, err := m.tailPosition(c.Tenant, c.Session)
	if err != nil {
		return Outcome{Err: err}
	}
	if pos.Seq == 0 {
		return Outcome{Err: refuse.NotFoundf("session", fmt.Sprintf("no session %s in group %d: it has no records (an empty session is placed: tally cluster place)", name, b.group))}
	}
	if c.Method == MethodMoveFence {
		if ended, err := m.moveEndedIn(b, b.group, name); err != nil {
			return Outcome{Err: err}
		} else if d.Move != 0 && ended == d.Move {
			return Outcome{Err: refuse.Conflictf("move", fmt.Sprintf("move %d of %s was aborted and group %d unfenced the session: a move is begun again", d.Move, name, b.group))}
		}
		if to, ok := m.movingTo(b, name); ok && to != d.To {
			return Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s is fenced for its move to group %d", name, to))}
		}
		b.move.moving[name] = d.To
		delete(b.move.unmoving, name)
	}
	return Outcome{Value: logEnd(pos)}
}

// moveUnfence ends the source's fence after an abort: the session's
// writes are taken here again from this entry on. On a node whose
// destination replica has installed the session already, its log comes
// back to the source here and now, rather than when that replica applies
// the drop: the source decides the session's next commands with its log
// held on every replica alike, however far the destination's replica on
// each node has got (simulator seed 1591: a write after the unfence was
// refused as moved on the nodes whose destination had not dropped yet,
// and written on the one whose had, and the replicas' logs diverged).
func (m *dataSM) moveUnfence(b *batchPlace, c Command, d MoveDoc) Outcome {
	name := c.Tenant + "/" + c.Session
	if _, ok := m.movingTo(b, name); ok {
		delete(b.move.moving, name)
		b.move.unmoving[name] = true
	}
	if g, ok := m.heldHere(b, name); ok && g != b.group {
		in, found, err := m.moveInOf(b, g, name)
		if err != nil {
			return Outcome{Err: err}
		}
		// Installed from here (or, its record lost with a snapshot, from
		// no other group): the log ends where this group fenced it, which
		// is where this replica's own stands.
		if !found || in.From == b.group {
			b.move.dropHeld[name] = g
			b.move.setHeld[name] = b.group
		}
	}
	if d.Move != 0 {
		pos, err := m.tailPosition(c.Tenant, c.Session)
		if err != nil {
			return Outcome{Err: err}
		}
		b.move.ended[name] = moveEnded{Move: d.Move, Length: pos.Offset}
	}
	return Outcome{Value: LogEnd{}}
}

// moveInOf is group's record of the session's install on this node, the
// batch's own included when group is its: an install and its drop can be
// applied in one batch (a node that restarted behind both), and the drop
// must find the install's record, or it would remove a log the node holds
// for the source too (simulator seed 1993).
func (m *dataSM) moveInOf(b *batchPlace, group uint64, name string) (moveIn, bool, error) {
	if in, ok := b.move.ins[name]; ok && group == b.group {
		if in == nil {
			return moveIn{}, false, nil
		}
		return *in, true, nil
	}
	var in moveIn
	found, err := m.get(nameKey(group, kindMoveIn, name), &in)
	return in, found, err
}

// moveEndedIn is the move whose end group recorded for the session on
// this node (0 for none), the batch's own included when group is its.
func (m *dataSM) moveEndedIn(b *batchPlace, group uint64, name string) (uint64, error) {
	if e, ok := b.move.ended[name]; ok && group == b.group {
		return e.Move, nil
	}
	var e moveEnded
	_, err := m.get(nameKey(group, kindMoveEnded, name), &e)
	return e.Move, err
}

// moveDrop undoes an install: the copy goes, or on a node that holds the
// source group too, returns to it (unless the source's unfence took it
// back already).
func (m *dataSM) moveDrop(b *batchPlace, c Command, d MoveDoc) Outcome {
	name := c.Tenant + "/" + c.Session
	m.forgetStaged(m.stagedPath(c.Tenant, c.Session))
	_ = os.Remove(m.stagedPath(c.Tenant, c.Session))
	if d.Move != 0 {
		b.move.ended[name] = moveEnded{Move: d.Move}
		if err := m.unwindContents(d.Move); err != nil {
			return Outcome{Err: err}
		}
	}
	if g, ok := m.heldHere(b, name); !ok || g != b.group {
		b.move.ins[name] = nil
		return Outcome{Value: LogEnd{}}
	}
	in, _, err := m.moveInOf(b, b.group, name)
	if err != nil {
		return Outcome{Err: err}
	}
	if in.Shared {
		b.move.setHeld[name] = in.From
	} else if err := m.removeSession(c.Tenant, c.Session); err != nil {
		return Outcome{Err: err}
	}
	delete(b.held, name)
	b.move.dropHeld[name] = b.group
	b.move.ins[name] = nil
	return Outcome{Value: LogEnd{}}
}

// moveRetire ends the session in the source group: refused there as moved
// from now on, and its copy dropped on a node that holds it for the source
// alone.
func (m *dataSM) moveRetire(b *batchPlace, c Command, d MoveDoc) Outcome {
	name := c.Tenant + "/" + c.Session
	if _, ok := m.movingTo(b, name); ok {
		delete(b.move.moving, name)
		b.move.unmoving[name] = true
	}
	b.fences[name] = d.To
	if g, ok := m.heldHere(b, name); (ok && g == b.group) || (!ok && GroupOf(m.cfg.Groups, c.Tenant, c.Session) == b.group) {
		if err := m.removeSession(c.Tenant, c.Session); err != nil {
			return Outcome{Err: err}
		}
		delete(b.held, name)
		b.move.dropHeld[name] = b.group
	}
	return Outcome{Value: LogEnd{}}
}

// retireAgain reports whether c is a retire of the session's move to the
// group it is fenced to here: the same retire again (its first answer
// lost), which answers as the first did rather than as moved.
func retireAgain(c Command, fencedTo uint64) bool {
	if c.Method != MethodMoveRetire {
		return false
	}
	var d MoveDoc
	return json.Unmarshal(c.Doc, &d) == nil && d.To == fencedTo
}

// removeSession closes and removes a session's directory.
func (m *dataSM) removeSession(tenant, session string) error {
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.closeSession(tenant + "/" + session); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}
