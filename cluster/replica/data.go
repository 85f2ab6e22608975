package replica

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	mrand "math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/internal/fault"
	"tally/cluster/node"
	"tally/ledger"
	"tally/refuse"
	"tally/service"
	"tally/store"
)

// dataSM is the data groups' state machine: each group's commands run
// through the Service on the sessions' ledgers it holds, with its uploads
// (upload.go) and its fences and held records (place.go).
type dataSM struct {
	base
	svc    service.Service
	faults fault.Replica // the simulator's (Inject); zero in production

	mu       sync.Mutex
	ledgers  map[string]*ledger.Ledger     // open sessions by tenant/session
	used     map[string]time.Time          // when each open session was last opened
	outcomes map[uint64]map[uint64]Outcome // group → index → outcome of its last batch
	prepared map[uint64]prepared           // group → the batch Prepare wrote the intent of; only the loop touches it
	// The data groups' fences (group → tenant/session → the group it is
	// placed in) and the held records (tenant/session → the data group
	// whose command first wrote its log).
	fences map[uint64]map[string]uint64
	held   map[string]uint64
	// moving are the data groups' sessions fenced for a move (group →
	// tenant/session → the group it moves to; move_data.go).
	moving map[uint64]map[string]uint64
	// stageMu serializes the staging of moving sessions' copies; stagedAt
	// is where each staged copy was last verified to end (under stageMu).
	stageMu  sync.Mutex
	stagedAt map[string]store.Position
	// scanned is, by tenant/session, how far its log was last read for
	// artifact records and whether it named one (under scanMu;
	// move_scan.go).
	scanMu  sync.Mutex
	scanned map[string]scanMark
	// noUploads are the data groups known to hold no upload record, whose
	// batches skip the scan for expired ones (upload.go); only the loop
	// touches it.
	noUploads map[uint64]bool

	now atomic.Int64 // the instant of the command being applied
	// batch is the uploads of the data group batch Apply runs, nil
	// between batches; only the loop touches it.
	batch *batchUploads
	// place is the fences and held records of the data group batch Apply
	// runs, nil between batches; only the loop touches it.
	place *batchPlace
	// holding is the sessions whose ledgers hold their writes for the
	// data group batch Apply runs (ledger.Ledger.Hold), by tenant/session;
	// only the loop touches it.
	holding map[string]*ledger.Ledger
	mintMu  sync.Mutex
	ids     *mrand.ChaCha8 // the command's ids, from its seed
	// kept are the groups' last snapshots' states (snapshot_data.go).
	kept keptStates
}

// newData opens the data groups' state: their fences and held records.
func newData(b base) (*dataSM, error) {
	m := &dataSM{base: b, ledgers: map[string]*ledger.Ledger{}, used: map[string]time.Time{}, outcomes: map[uint64]map[uint64]Outcome{},
		prepared: map[uint64]prepared{}, noUploads: map[uint64]bool{}, ids: mrand.NewChaCha8([32]byte{})}
	m.cfg.Ledger.Now = m.Now
	m.cfg.Ledger.MintID = m.mintID
	m.cfg.Ledger.SyncByCaller = true // once per batch, in Apply
	if err := m.cfg.Ledger.Validate(); err != nil {
		return nil, err
	}
	m.svc = m.cfg.Service(m)
	if err := m.loadPlace(); err != nil {
		return nil, err
	}
	return m, nil
}

// Now is the instant of the command being applied (the last one, between
// commands): the clock of the replica's ledgers and of its Service, so a
// command's records and its response are stamped with its proposer's
// instant on every replica.
func (m *dataSM) Now() time.Time { return time.Unix(0, m.now.Load()).UTC() }

// Root is the replica's ledger directory.
func (m *dataSM) Root() string { return m.cfg.Root }

// Service is the Service over this replica's sessions, for reads.
func (m *dataSM) Service() service.Service { return m.svc }

// Close closes every open session.
func (m *dataSM) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for k, l := range m.ledgers {
		errs = append(errs, l.Close())
		delete(m.ledgers, k)
	}
	return errors.Join(errs...)
}

func (m *dataSM) mintID() string {
	m.mintMu.Lock()
	v := m.ids.Uint64()
	m.mintMu.Unlock()
	b := [3]byte{byte(v), byte(v >> 8), byte(v >> 16)}
	return "pnk_" + hex.EncodeToString(b[:])
}

// MintExpectationID mints the id of an expectation the command being
// applied raises without one (ledgerservice.Config.MintExpectationID):
// drawn from the command's seed, as its promise ids are, so every replica
// mints the same.
func (m *dataSM) MintExpectationID() string {
	m.mintMu.Lock()
	v := m.ids.Uint64()
	m.mintMu.Unlock()
	b := binary.LittleEndian.AppendUint64(nil, v)
	return "exp_" + hex.EncodeToString(b[:6])
}

// Open is ledgerservice.Sessions over the replica's ledger directory.
func (m *dataSM) Open(ctx context.Context, tenant, session string, create bool) (*ledger.Ledger, error) {
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return nil, err
	}
	key := tenant + "/" + session
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.ledgers[key]; ok {
		m.used[key] = m.cfg.Clock()
		return l, nil
	}
	if !create && !store.HasLog(dir) {
		return nil, refuse.New(service.CodeNoSuchSession, "session", "no session "+key+": reads never create one; its first accepted write does")
	}
	l, err := ledger.Open(dir, m.cfg.Ledger)
	if err != nil {
		return nil, fmt.Errorf("open session %s: %w", key, err)
	}
	m.ledgers[key], m.used[key] = l, m.cfg.Clock()
	return l, nil
}

// closeSession closes a session's ledger if open. Called with mu held. A
// session the batch holds (hold) writes what it decided and lets go of its
// lock first: a command closing the session (a move's retire or drop) may
// follow a write to it in the same batch, and closing a held ledger would
// wait on its own lock for good.
func (m *dataSM) closeSession(key string) error {
	l, ok := m.ledgers[key]
	if !ok {
		return nil
	}
	if held, ok := m.holding[key]; ok {
		delete(m.holding, key)
		if err := held.Unhold(); err != nil {
			return fmt.Errorf("close session %s: write its held batch: %w", key, err)
		}
	}
	delete(m.ledgers, key)
	delete(m.used, key)
	return l.Close()
}

// applied is a data group's durable applied index, after finishing the
// recovery of a batch a crash interrupted.
func (m *dataSM) applied(group uint64) (uint64, error) {
	a, err := m.restored(group)
	if err != nil {
		return 0, err
	}
	if err := m.reconcileUploads(group); err != nil {
		return 0, fmt.Errorf("replica: group %d: staged uploads: %w", group, err)
	}
	var in intent
	ok, err := m.get(gkey(group, kindIntent), &in)
	if err != nil || !ok || in.Last <= a.Index {
		return a.Index, err
	}
	if err := m.cutBack(in); err != nil {
		return 0, fmt.Errorf("replica: group %d: recover batch %d–%d: %w", group, in.First, in.Last, err)
	}
	m.log.Info("replica: recovered an interrupted batch", "group", group, "first", in.First, "last", in.Last, "sessions", len(in.Sessions))
	return a.Index, nil
}

// cutBack returns each session of an interrupted batch to where it stood
// before the batch; its checkpoint, which may be past that, goes too.
func (m *dataSM) cutBack(in intent) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, key := range slices.Sorted(maps.Keys(in.Sessions)) {
		pos := in.Sessions[key]
		if err := m.closeSession(key); err != nil {
			return err
		}
		t, s, _ := strings.Cut(key, "/")
		dir, err := store.SessionDir(m.cfg.Root, t, s)
		if err != nil {
			return err
		}
		size := int64(0)
		fi, err := os.Stat(store.LogPath(dir))
		if err == nil {
			size = fi.Size()
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if size < pos.Offset {
			return fmt.Errorf("session %s: its log is %d bytes, short of the %d it held durably before the batch", key, size, pos.Offset)
		}
		if size == pos.Offset {
			continue
		}
		// What follows pos is the interrupted batch's, written without
		// fsync and perhaps torn: cut it whole, unread.
		lg, err := store.Open(dir, m.log)
		if err != nil {
			return err
		}
		err = os.Truncate(store.LogPath(dir), pos.Offset)
		if err == nil {
			err = lg.Sync()
		}
		if err == nil {
			err = lg.RemoveCheckpoint()
		}
		if cerr := lg.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// prepared is a data group's batch as Prepare decoded it, with its intent
// written in the raft batch.
type prepared struct {
	in   intent
	cmds []*Command
}

// plan decodes a batch's commands (nil where an entry is not one: refused
// as it runs) and makes its intent: where each session it writes stands.
func (m *dataSM) plan(ents []node.Entry) ([]*Command, intent, error) {
	cmds := make([]*Command, len(ents))
	in := intent{First: ents[0].Index, Last: ents[len(ents)-1].Index, Sessions: map[string]store.Position{}}
	for i, e := range ents {
		if e.Kind != node.KindCommand {
			continue
		}
		c, err := DecodeCommand(e.Data)
		if err != nil {
			continue // refused below, the same everywhere
		}
		cmds[i] = &c
		if c.Method == MethodStage || c.Method == MethodUnstage || c.Method == MethodReceipt || c.Method == MethodFence || isMoveMethod(c.Method) {
			continue // stages bytes or fences: writes no session's log
		}
		key := c.Tenant + "/" + c.Session
		if _, seen := in.Sessions[key]; seen {
			continue
		}
		pos, err := m.position(c.Tenant, c.Session)
		if err != nil {
			return nil, intent{}, err
		}
		in.Sessions[key] = pos
	}
	return cmds, in, nil
}

// prepare writes a data group's batch's intent in the node's raft batch,
// which the node fsyncs before it applies the batch: one fsync instead of
// one for the raft log and one for the intent. apply takes the decoded
// commands from it.
func (m *dataSM) prepare(group uint64, ents []node.Entry, w node.PrepareWriter) error {
	delete(m.prepared, group)
	cmds, in, err := m.plan(ents)
	if err != nil {
		return err
	}
	if len(in.Sessions) > 0 {
		enc, err := json.Marshal(in)
		if err != nil {
			return err
		}
		if err := w.Set(gkey(group, kindIntent), enc); err != nil {
			return fmt.Errorf("replica: group %d: record intent: %w", group, err)
		}
	}
	m.prepared[group] = prepared{in: in, cmds: cmds}
	return nil
}

// apply runs a batch of one data group's entries.
func (m *dataSM) apply(group uint64, ents []node.Entry) ([][]byte, error) {
	a, err := m.progress(group)
	if err != nil {
		return nil, err
	}
	p, ok := m.prepared[group]
	delete(m.prepared, group)
	cmds, in := p.cmds, p.in
	if !ok || in.First != ents[0].Index || in.Last != ents[len(ents)-1].Index {
		// Not prepared (a state machine driven without a node's loop):
		// the intent takes an fsync of its own.
		if cmds, in, err = m.plan(ents); err != nil {
			return nil, err
		}
		if len(in.Sessions) > 0 {
			if err := m.commit(func(b *pebble.Batch) error { return setJSON(b, gkey(group, kindIntent), in) }, true); err != nil {
				return nil, fmt.Errorf("replica: group %d: record intent: %w", group, err)
			}
		}
	}
	m.batch, m.place = m.beginUploads(group), beginPlace(group)
	defer func() { m.batch.close(); m.batch, m.place = nil, nil }()
	defer m.unholdAll() // a failed batch's sessions let go of their locks too
	outs := make(map[uint64]Outcome, len(ents))
	results := make([][]byte, len(ents))
	for i, e := range ents {
		a.Epoch = nextEpoch(a.Epoch, e)
		m.batch.epoch = a.Epoch
		if e.Kind != node.KindCommand {
			continue
		}
		var out Outcome
		if c := cmds[i]; c == nil {
			out.Err = refuse.Invalidf("command", "entry is not a tally command")
		} else {
			a.TS = max(a.TS, c.TS) // an instant never goes back within a group
			out = m.runEntry(*c, a.TS, e.Waited)
			if out.Err != nil && Operational(out.Err) {
				return nil, fmt.Errorf("replica: group %d entry %d (%s %s/%s): %w", group, e.Index, c.Method, c.Tenant, c.Session, out.Err)
			}
			if err := m.noteHeld(m.place, *c); err != nil {
				return nil, fmt.Errorf("replica: group %d entry %d (%s %s/%s): %w", group, e.Index, c.Method, c.Tenant, c.Session, err)
			}
		}
		outs[e.Index] = out
	}
	if err := m.unholdAll(); err != nil {
		return nil, fmt.Errorf("replica: group %d: %w", group, err)
	}
	if m.faults.BeforeSync != nil {
		if err := m.faults.BeforeSync(group, in.Sessions); err != nil {
			return nil, fmt.Errorf("replica: group %d: %w", group, err)
		}
	}
	if err := m.syncSessions(in.Sessions); err != nil {
		return nil, fmt.Errorf("replica: group %d: %w", group, err)
	}
	if err := m.batch.sync(); err != nil {
		return nil, fmt.Errorf("replica: group %d: %w", group, err)
	}
	a.Index = ents[len(ents)-1].Index
	// Not synced: the next intent's synced write carries it to the disk,
	// and if a crash loses it the intent is replayed to the same bytes
	// (the staging files cut back to the records it leaves). Unless the
	// batch used or abandoned an upload: its staging file goes once the
	// record saying so is durable, or a crash that lost the record would
	// replay the command that used the upload with its bytes gone.
	pb := m.cfg.DB.Pebble().NewBatch()
	defer pb.Close()
	drop, err := m.recordApplied(pb, group, a)
	if err == nil {
		err = m.cfg.DB.Commit(pb, len(drop) > 0)
	}
	if err != nil {
		return nil, fmt.Errorf("replica: group %d: record applied index %d: %w", group, a.Index, err)
	}
	m.removeStaged(drop)
	m.placeDone(m.place)
	m.mu.Lock()
	m.outcomes[group] = outs
	err = m.evictLocked()
	m.mu.Unlock()
	return results, err
}

// recordApplied writes, in pb, what a data group's batch leaves besides
// its sessions' logs: its applied index, its uploads' and held records,
// the intent gone; and returns the staging files to remove once pb is
// committed.
func (m *dataSM) recordApplied(pb *pebble.Batch, group uint64, a applied) ([]string, error) {
	if err := setJSON(pb, gkey(group, kindApplied), a); err != nil {
		return nil, err
	}
	drop, err := m.batch.record(pb, a.TS)
	if err != nil {
		return nil, err
	}
	if err := m.place.record(pb); err != nil {
		return nil, err
	}
	return drop, pb.Delete(gkey(group, kindIntent), nil)
}

// evictLocked closes the least recently opened sessions past MaxOpen that
// have been idle for IdleClose. Called from the loop, after a batch, so no
// command is using them; mu is held. Closing is a cache's: a failure is
// logged, and the session reopens on its next use.
func (m *dataSM) evictLocked() error {
	if len(m.ledgers) <= m.cfg.MaxOpen {
		return nil
	}
	// Ties (sessions opened at one instant) go by name, so the same
	// sessions close whatever order the map hands them in.
	keys := slices.SortedFunc(maps.Keys(m.ledgers), func(a, b string) int {
		return cmp.Or(m.used[a].Compare(m.used[b]), strings.Compare(a, b))
	})
	cutoff := m.cfg.Clock().Add(-m.cfg.IdleClose)
	for _, k := range keys[:len(keys)-m.cfg.MaxOpen] {
		if m.used[k].After(cutoff) {
			break
		}
		if err := m.closeSession(k); err != nil {
			m.log.Warn("replica: close idle session", "session", k, "err", err)
		}
	}
	return nil
}

// hold has the session's ledger, if open, hold its writes until the
// batch ends: a batch's commands in one session are then written to its
// log together, under one lock, rather than each in a group commit of its
// own. Every command is still decided alone, in order, by the same code.
func (m *dataSM) hold(tenant, session string) {
	key := tenant + "/" + session
	if _, ok := m.holding[key]; ok {
		return
	}
	m.mu.Lock()
	l, ok := m.ledgers[key]
	m.mu.Unlock()
	if !ok {
		return // not open yet: its first command opens it, the next hold it
	}
	l.Hold()
	if m.holding == nil {
		m.holding = map[string]*ledger.Ledger{}
	}
	m.holding[key] = l
}

// unholdAll writes what the batch's held sessions decided and lets go of
// their locks; the first failure fails the batch.
func (m *dataSM) unholdAll() error {
	var first error
	for key, l := range m.holding {
		if err := l.Unhold(); err != nil && first == nil {
			first = fmt.Errorf("write session %s: %w", key, err)
		}
		delete(m.holding, key)
	}
	return first
}

// syncSessions makes the batch's writes to its sessions durable, before
// its applied index is recorded.
func (m *dataSM) syncSessions(sessions map[string]store.Position) error {
	for key := range sessions {
		m.mu.Lock()
		l, ok := m.ledgers[key]
		m.mu.Unlock()
		if !ok {
			continue // refused before it opened anything
		}
		if err := l.Sync(); err != nil {
			return fmt.Errorf("sync session %s: %w", key, err)
		}
	}
	return nil
}

// position is where a session's log ends now.
func (m *dataSM) position(tenant, session string) (store.Position, error) {
	return m.logEnd(tenant, session, func(string) (store.Position, error) {
		l, err := m.Open(context.Background(), tenant, session, false)
		if err != nil {
			return store.Position{}, err
		}
		return l.Position(), nil
	})
}

// logEnd is where a session's log ends now: its open ledger's position,
// else what closed reads of the log in its directory (it has one).
func (m *dataSM) logEnd(tenant, session string, closed func(dir string) (store.Position, error)) (store.Position, error) {
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return store.Position{}, nil // the command is refused for its names
	}
	m.mu.Lock()
	l, ok := m.ledgers[tenant+"/"+session]
	m.mu.Unlock()
	if !ok {
		if !store.HasLog(dir) {
			return store.Position{}, nil
		}
		return closed(dir)
	}
	return l.Position(), nil
}

// runEntry applies one command of a data group at instant ts: a chunk of
// an upload, a fence, or a method. A session its group has fenced takes
// no command there but a fence. answered: a proposal here waits for the
// outcome (node.Entry.Waited).
func (m *dataSM) runEntry(c Command, ts int64, answered bool) Outcome {
	name := c.Tenant + "/" + c.Session
	if to, ok := m.fencedTo(m.place, name); ok && c.Method != MethodFence && c.Method != MethodMoveInstall && !retireAgain(c, to) {
		return Outcome{Err: &Moved{Session: name, From: m.place.group, Group: to}}
	}
	if out, ok := m.moveEntry(m.place, c); ok {
		return out
	}
	switch c.Method {
	case MethodStage:
		return m.stage(c, ts)
	case MethodUnstage:
		return m.unstage(c, ts)
	case MethodReceipt:
		return m.receipt(c)
	case MethodFence:
		return m.fence(m.place, c)
	}
	return m.run(c, ts, answered)
}

// run applies one method's command at instant ts. Unless answered (a
// proposal here waits for its outcome) the Service leaves the answer's
// views out (service.Call.NoAnswer): the command is decided and written
// the same.
func (m *dataSM) run(c Command, ts int64, answered bool) Outcome {
	meth, ok := m.cfg.Methods[c.Method]
	if !ok {
		return Outcome{Err: refuse.Invalidf("method", fmt.Sprintf("%q is not a command this node knows", c.Method))}
	}
	m.now.Store(ts)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], c.Seed)
	m.mintMu.Lock()
	m.ids = mrand.NewChaCha8(seed)
	m.mintMu.Unlock()
	m.hold(c.Tenant, c.Session)
	defer m.hold(c.Tenant, c.Session) // a session the command created
	call := service.Call{Tenant: c.Tenant, Session: c.Session, Actor: c.Actor, Person: c.Person, RequestID: c.RequestID, Now: time.Unix(0, ts).UTC(), NoAnswer: !answered}
	v, err := meth(context.Background(), m.svc, call, c.Doc)
	return Outcome{Value: v, Err: err}
}

// take hands over the outcome of a data group's entry applied in its
// last batch, once.
func (m *dataSM) take(group, index uint64) (Outcome, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	o, ok := m.outcomes[group][index]
	if ok {
		delete(m.outcomes[group], index)
	}
	return o, ok
}
