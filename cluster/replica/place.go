package replica

// Placement. The meta group's directory maps tenant/session to a data
// group: the hash of the name (GroupOf) unless a placement is recorded
// (OpPlacementSet). A placement is recorded only for a session that holds
// no record yet, and only once the group the session routed to before has
// fenced it (MethodFence): that group then refuses every command of the
// session (Moved), so no replica can take a write there that the group
// the session is placed in would never see, whenever a node applies the
// directory. Which sessions a group holds on this replica never depends
// on the directory either: the command that first writes a session's log
// records the group it ran in beside the applied index (its held record),
// and a snapshot carries it with the logs.

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/api"
	"tally/cluster/node"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/sessionname"
)

// Keys of the directory, the fences and the held records, each followed by
// a session's "tenant/session" name. Stored: do not rename.
const (
	kindPlacement = 'p' // meta group: the session's recorded group
	kindFence     = 'f' // data group: the group the session is placed in
	kindHeld      = 'h' // data group: the session's log is this group's
)

// groupRecord is a placement's or a fence's value: the group the session is
// placed in. Stored: do not rename.
type groupRecord struct {
	Group uint64 `json:"group"`
}

// heldRecord is a held record's value: nothing yet beyond its key.
// Stored: do not rename.
type heldRecord struct{}

func nameKey(group uint64, kind byte, name string) []byte {
	return append(gkey(group, kind), name...)
}

// MethodFence is the command that fences a session in its group before
// its placement elsewhere is recorded. Stored in the raft log: do not
// rename.
const MethodFence = "Fence"

// FenceDoc is a Fence command's document: the group the session is to be
// placed in.
type FenceDoc struct {
	Group uint64 `json:"group"`
}

// Placement is a session's placement: recorded in the directory, or asked
// for by a Fence or a placement.set.
type Placement struct {
	Tenant  string `json:"tenant"`
	Session string `json:"session"`
	Group   uint64 `json:"group"`
}

// Name is the placement's "tenant/session".
func (p Placement) Name() string { return p.Tenant + "/" + p.Session }

// Moved refuses a command of a session that its group has fenced: the
// session is placed in Group. It is retryable: a node routes the command
// there once it has applied the placement (From is where it went).
// Unrecorded is set by a node that found no placement recorded in the
// directory after a while: a placement stopped between its two steps.
type Moved struct {
	Session     string
	From, Group uint64
	Unrecorded  bool
}

func (e *Moved) Error() string {
	if e.Unrecorded {
		return fmt.Sprintf("session %s is fenced in group %d for its placement in group %d, which the directory does not record yet: retry later, or complete it (tally cluster place %s --group %d)",
			e.Session, e.From, e.Group, e.Session, e.Group)
	}
	return fmt.Sprintf("session %s is placed in group %d; group %d no longer takes its commands: retry", e.Session, e.Group, e.From)
}

// CodeMoved is the refusal code of a command or read of a session that its
// group has fenced (HTTP 503: retry).
const CodeMoved = service.CodeMoved

// Refusal is the retryable answer every binding gives (rest.Refuser):
// 503 Moved with Retry-After, the group the session is placed in ("group")
// and the one that refused it ("from_group").
func (e *Moved) Refusal() *rest.Refusal {
	return rest.NewRetryable(CodeMoved, e.Error(),
		api.M("group", api.U(e.Group)), api.M("from_group", api.U(e.From)))
}

// CheckPlacement refuses a malformed placement: the names' shape, a group
// that is not one of the cluster's data groups.
func CheckPlacement(p Placement, groups int) error {
	for _, f := range []struct{ field, name string }{{"tenant", p.Tenant}, {"session", p.Session}} {
		if err := sessionname.Check(f.field, f.name); err != nil {
			return refuse.Invalidf(f.field, fmt.Sprintf("%q %s", f.name, strings.TrimPrefix(err.Error(), f.field+": ")))
		}
	}
	first, last := node.MetaGroup+1, node.MetaGroup+uint64(groups)
	if p.Group < first || p.Group > last {
		return refuse.Invalidf("group", fmt.Sprintf("%d is not a data group of this cluster: its data groups are %d to %d", p.Group, first, last))
	}
	return nil
}

// Holder is the data group whose log of the session this replica holds:
// the group whose command first wrote it, else (a session written before
// held records, or none yet) the hash of its name. Unlike GroupOf it never
// depends on when this replica applied the directory.
func (m *dataSM) Holder(tenant, session string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holderLocked(tenant + "/" + session)
}

func (m *dataSM) holderLocked(name string) uint64 {
	if g, ok := m.held[name]; ok {
		return g
	}
	t, s, _ := strings.Cut(name, "/")
	return GroupOf(m.cfg.Groups, t, s)
}

// heldBy is the group the session's held record names, if it has one.
func (m *dataSM) heldBy(name string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.held[name]
	return g, ok
}

// FencedTo reports whether group has fenced the session as this replica
// has applied it, and the group the session is placed in.
func (m *dataSM) FencedTo(group uint64, tenant, session string) (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.fences[group][tenant+"/"+session]
	return g, ok
}

// batchPlace is a data group batch's fences and held records, written with
// its applied index: visible to the batch's later commands at once, to
// everyone else once committed. Only the loop uses it.
type batchPlace struct {
	group  uint64
	fences map[string]uint64
	held   map[string]bool
	// move is the batch's move records (move_data.go).
	move *batchMove
}

func beginPlace(group uint64) *batchPlace {
	return &batchPlace{group: group, fences: map[string]uint64{}, held: map[string]bool{}, move: newBatchMove()}
}

// fencedTo is the session's fence in the batch's group, the batch's own
// included.
func (m *dataSM) fencedTo(b *batchPlace, name string) (uint64, bool) {
	if g, ok := b.fences[name]; ok {
		return g, true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.fences[b.group][name]
	return g, ok
}

// holds reports whether the session's log is the batch's group's, the
// batch's own held records included.
func (m *dataSM) holds(b *batchPlace, name string) bool {
	if b.held[name] {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.holderLocked(name) == b.group
}

// noteHeld records, after a command of the batch, that its session's log
// is the group's once the command has written it.
func (m *dataSM) noteHeld(b *batchPlace, c Command) error {
	name := c.Tenant + "/" + c.Session
	if c.Method == MethodStage || c.Method == MethodUnstage || c.Method == MethodReceipt || c.Method == MethodFence || isMoveMethod(c.Method) || b.held[name] {
		return nil
	}
	m.mu.Lock()
	_, known := m.held[name]
	m.mu.Unlock()
	if known {
		return nil
	}
	pos, err := m.position(c.Tenant, c.Session)
	if err != nil {
		return err
	}
	if pos.Offset > 0 {
		b.held[name] = true
	}
	return nil
}

// fence applies a Fence command in the batch's group: the session is
// fenced for its placement in the document's group, unless the group holds
// records of it. Fencing it again for the same group answers as the first
// time; for another group it is refused (that placement is under way or
// done). Asked for the group itself, it fences nothing, and is refused
// only if the session is fenced for another group. Only the session's
// hash's group fences it: in another, the session is placed, and a placed
// session does not move yet.
func (m *dataSM) fence(b *batchPlace, c Command) Outcome {
	var d FenceDoc
	if err := json.Unmarshal(c.Doc, &d); err != nil {
		return Outcome{Err: refuse.Invalidf("command", "a fence command's document: "+err.Error())}
	}
	p := Placement{Tenant: c.Tenant, Session: c.Session, Group: d.Group}
	// The node checked the group against the meta group's (an added one
	// among them); a data group's replica knows only their bound.
	if err := CheckPlacement(p, MaxDataGroups); err != nil {
		return Outcome{Err: err}
	}
	name := p.Name()
	if to, ok := m.fencedTo(b, name); ok {
		if to == d.Group {
			return Outcome{Value: p}
		}
		return Outcome{Err: refuse.Conflictf("group", fmt.Sprintf("session %s is fenced in group %d for its placement in group %d: complete that one (tally cluster place %s --group %d)", name, b.group, to, name, to))}
	}
	if d.Group == b.group {
		return Outcome{Value: p}
	}
	if b.group != GroupOf(m.cfg.Groups, c.Tenant, c.Session) {
		return Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s is placed in group %d; moving a session is not supported yet", name, b.group))}
	}
	if m.holds(b, name) {
		pos, err := m.position(c.Tenant, c.Session)
		if err != nil {
			return Outcome{Err: err}
		}
		if pos.Seq > 0 {
			return Outcome{Err: refuse.Conflictf("session", fmt.Sprintf("session %s already has %s in group %d; moving a session is not supported yet", name, records(pos.Seq), b.group))}
		}
	}
	b.fences[name] = d.Group
	return Outcome{Value: p}
}

// record writes the batch's fences and held records into pb.
func (b *batchPlace) record(pb *pebble.Batch) error {
	for name, g := range b.fences {
		if err := setJSON(pb, nameKey(b.group, kindFence, name), groupRecord{Group: g}); err != nil {
			return err
		}
	}
	for name := range b.held {
		if err := setJSON(pb, nameKey(b.group, kindHeld, name), heldRecord{}); err != nil {
			return err
		}
	}
	return b.move.record(b.group, pb)
}

// done makes a committed batch's fences and held records the replica's.
func (m *dataSM) placeDone(b *batchPlace) {
	if len(b.fences) == 0 && len(b.held) == 0 && b.move.empty() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(b.fences) > 0 && m.fences[b.group] == nil {
		m.fences[b.group] = map[string]uint64{}
	}
	maps.Copy(m.fences[b.group], b.fences)
	m.moveDoneLocked(b.group, b.move)
	for name := range b.held {
		m.held[name] = b.group
	}
}

// loadPlace reads every data group's fences and the held records.
func (m *dataSM) loadPlace() error {
	var err error
	m.fences, m.held = map[uint64]map[string]uint64{}, map[string]uint64{}
	// Every group that may exist: groups added after the bootstrap too.
	for g := node.MetaGroup + 1; g <= node.MetaGroup+uint64(MaxDataGroups); g++ {
		if m.fences[g], err = m.scanGroups(gkey(g, kindFence)); err != nil {
			return err
		}
		if err := m.loadMoving(g); err != nil {
			return err
		}
		err = m.scan(gkey(g, kindHeld), func(name string, _ []byte) error {
			if other, ok := m.held[name]; ok {
				return fmt.Errorf("replica: session %s is held by groups %d and %d", name, other, g)
			}
			m.held[name] = g
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// groupFences is a data group's fences as applied, for its snapshot.
func (m *dataSM) groupFences(group uint64) map[string]uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.fences[group])
}

// clearPlace drops the group's fences and held records, in pb and in
// memory, for a snapshot's install, and returns the install's own: the
// snapshot's fences, and the held records its logs add as they arrive.
func (m *dataSM) clearPlace(group uint64, pb *pebble.Batch, fences map[string]uint64) (*batchPlace, error) {
	for _, kind := range []byte{kindFence, kindHeld} {
		lo := gkey(group, kind)
		if err := pb.DeleteRange(lo, gkey(group, kind+1), nil); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	delete(m.fences, group)
	maps.DeleteFunc(m.held, func(_ string, g uint64) bool { return g == group })
	m.mu.Unlock()
	b := beginPlace(group)
	maps.Copy(b.fences, fences)
	return b, nil
}

func records(n uint64) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}
