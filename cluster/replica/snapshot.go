package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/ledger"
	"tally/store"
)

// A snapshot of a group is its manifest (node.Manifest) as of the applied
// index: inline, the applied head (for the meta group its membership,
// tokens and placements; for a data group its fences); for a data group,
// one "log" entry per session it holds (SM.Holder) naming its log's length
// at that index. The body, written later and possibly on
// another goroutine while the group applies more, is each log's first
// Length bytes, read from the files. That is consistent because a
// session's log is append-only and byte for byte the same on every
// replica: the prefix a manifest names never changes after the index it
// was taken at (a restart's cut-back only removes what follows the
// durable applied index, and a restore rewrites a log with the same
// committed prefix). A log found shorter than its length fails the stream,
// and raft sends a newer snapshot.

// Manifest entry kinds of a replica's snapshot; sent between nodes: do
// not rename.
const kindSessionLog = "log"

// snapshotHead is a snapshot's inline state.
type snapshotHead struct {
	Applied applied      `json:"applied"`
	Members []Member     `json:"members,omitempty"` // the meta group's
	Tokens  []TokenEntry `json:"tokens,omitempty"`  // the meta group's
	Nonces  []NonceEntry `json:"nonces,omitempty"`  // the meta group's
	// Placements are the meta group's directory: tenant/session → group,
	// in a snapshot of the previous release (read, no longer written).
	Placements map[string]uint64 `json:"placements,omitempty"`
	// Directory is the meta group's directory's ranges, whose entries are
	// the body (snapshot_meta.go).
	Directory *dirHead `json:"directory,omitempty"`
	// Policy is the meta group's placement policy (policy.go).
	Policy *Policy `json:"policy,omitempty"`
	// Liveness are the meta group's committed liveness facts.
	Liveness []LivenessFact `json:"liveness,omitempty"`
	// Epochs and Moves are the meta group's sessions' epochs (in a
	// snapshot of the previous release) and moves.
	Epochs map[string]uint64 `json:"epochs,omitempty"`
	Moves  []Move            `json:"moves,omitempty"`
	// Added are the meta group's data groups added after the bootstrap.
	Added []AddedGroup `json:"added_groups,omitempty"`
	// Moving are a data group's sessions fenced for a move: tenant/session
	// → the group each moves to.
	Moving map[string]uint64 `json:"moving,omitempty"`
	// Uploads are a data group's used uploads' records, by id.
	Uploads map[string]uploadRecord `json:"uploads,omitempty"`
	// Fences are a data group's fenced sessions: tenant/session → the
	// group each is placed in.
	Fences map[string]uint64 `json:"fences,omitempty"`
	// Receipts are a data group's custody receipts: content/node → the
	// placement epoch each was made at.
	Receipts map[string]uint64 `json:"receipts,omitempty"`
	// Contents are a data group's content records (content.go): the
	// bytes its records name, their size and holders. The bytes are not
	// in the snapshot: the node installing it fetches them.
	Contents map[string]contentRecord `json:"contents,omitempty"`
	// Sessions are a data group's sessions' logs and their lengths, in
	// the order the logs follow in the body (snapshot_data.go).
	Sessions []SessionLength `json:"sessions,omitempty"`
}

// Snapshot is the group's manifest as of its applied index.
func (m *SM) Snapshot(group uint64) (uint64, node.Manifest, error) {
	var head snapshotHead
	var entries []node.ManifestEntry
	var err error
	if group == node.MetaGroup {
		head, entries, err = m.metaSM.snapshot()
	} else {
		head, entries, err = m.dataSM.chunkedSnapshot(group)
	}
	if err != nil {
		return 0, node.Manifest{}, err
	}
	inline, err := json.Marshal(head)
	if err != nil {
		return 0, node.Manifest{}, err
	}
	return head.Applied.Index, node.Manifest{Inline: inline, Entries: entries}, nil
}

// snapshot is a data group's snapshot head (its used uploads and fences)
// and entries (its sessions' logs and its bytes).
func (m *dataSM) snapshot(group uint64) (snapshotHead, []node.ManifestEntry, error) {
	a, err := m.progress(group)
	if err != nil {
		return snapshotHead{}, nil, err
	}
	head := snapshotHead{Applied: a}
	entries, uploads, err := m.dataEntries(group)
	if err != nil {
		return snapshotHead{}, nil, fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	head.Uploads, head.Fences, head.Moving = uploads, m.groupFences(group), m.groupMoving(group)
	if head.Receipts, err = m.groupReceipts(group); err != nil {
		return snapshotHead{}, nil, fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	if head.Contents, err = m.groupContentRecords(group); err != nil {
		return snapshotHead{}, nil, fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	return head, entries, nil
}

// dataEntries lists a data group's sessions' logs, then its bytes
// (snapshot_bytes.go), and returns its used uploads' records.
func (m *dataSM) dataEntries(group uint64) ([]node.ManifestEntry, map[string]uploadRecord, error) {
	logs, err := m.sessionEntries(group)
	if err != nil {
		return nil, nil, err
	}
	bytes, used, err := m.byteEntries(group)
	return append(logs, bytes...), used, err
}

// sessionEntries lists the group's sessions with their logs' lengths now.
func (m *dataSM) sessionEntries(group uint64) ([]node.ManifestEntry, error) {
	sessions, err := m.heldSessions(group)
	if err != nil {
		return nil, err
	}
	var out []node.ManifestEntry
	for _, se := range sessions {
		length, err := m.logLength(se.Tenant, se.Name)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", se, err)
		}
		if length == 0 {
			continue // an empty log is not a session
		}
		out = append(out, node.ManifestEntry{Kind: kindSessionLog, Name: se.String(), Length: uint64(length)})
	}
	return out, nil
}

// logLength is where a session's log ends now: its open ledger's
// position, or for a closed session its file's size (a closed session's
// log ends with its last record: a torn tail is cut back when the replica
// starts). A snapshot of a group of many sessions so opens none.
func (m *dataSM) logLength(tenant, session string) (int64, error) {
	m.mu.Lock()
	l, ok := m.ledgers[tenant+"/"+session]
	m.mu.Unlock()
	if ok {
		return l.Position().Offset, nil
	}
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return 0, nil
	}
	fi, err := os.Stat(store.LogPath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

// readSession calls f with a session's ledger: the open one, or one opened
// for f alone and closed after, with mu held so that no other open of the
// session races it. A snapshot reading every session of a large group so
// keeps no more sessions open than before.
func (m *dataSM) readSession(tenant, session string, f func(*ledger.Ledger) error) error {
	key := tenant + "/" + session
	m.mu.Lock()
	if l, ok := m.ledgers[key]; ok {
		m.mu.Unlock()
		return f(l)
	}
	defer m.mu.Unlock()
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return err
	}
	l, err := ledger.Open(dir, m.cfg.Ledger)
	if err != nil {
		return fmt.Errorf("open session %s: %w", key, err)
	}
	return errors.Join(f(l), l.Close())
}

// WriteSnapshot writes the body of a manifest Snapshot made: each
// session's log up to its length, read from the file; for the meta group
// its directory's ranges. It touches no state the loop holds, so it runs
// on any goroutine.
func (m *SM) WriteSnapshot(group uint64, man node.Manifest, w io.Writer) error {
	if group == node.MetaGroup {
		return m.metaSM.writeSnapshot(man, w)
	}
	return m.dataSM.writeSnapshot(group, man, w)
}

func (m *dataSM) writeSnapshot(group uint64, man node.Manifest, w io.Writer) error {
	kept, err := m.keptState(group, man)
	if err != nil {
		return fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	err = man.WriteEntries(w, func(e node.ManifestEntry, w io.Writer) error {
		switch e.Kind {
		case kindGroupState:
			_, err := w.Write(kept.state)
			return err
		case kindSessionLogs:
			for _, s := range kept.sessions {
				if err := m.copyLog(s.Name, int64(s.Length), w); err != nil {
					return fmt.Errorf("session %s: %w", s.Name, err)
				}
			}
			return nil
		case kindSessionLog:
			return m.copyLog(e.Name, int64(e.Length), w)
		}
		return m.writeBytesEntry(group, e, w)
	})
	if err != nil {
		return fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	return nil
}

func (m *dataSM) copyLog(session string, length int64, w io.Writer) error {
	dir, err := m.sessionDir(session)
	if err != nil {
		return err
	}
	f, err := os.Open(store.LogPath(dir))
	if err != nil {
		return err
	}
	defer f.Close()
	switch n, err := io.CopyN(w, f, length); {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("the log holds %d bytes, fewer than the %d the snapshot names", n, length)
	case err != nil:
		return err
	}
	return nil
}

// sessionDir is the directory of a "tenant/session" name.
func (m *dataSM) sessionDir(name string) (string, error) {
	t, s, _ := strings.Cut(name, "/")
	return store.SessionDir(m.cfg.Root, t, s)
}

// Restore replaces the group's state with a snapshot's, durably, with
// applied = index. The empty manifest is the initial state of a new group:
// no session, or on a restored node (Config.Restored) the group's sessions
// the backup left in Root. A crash halfway is detected at the next start
// (the restoring mark) rather than served from.
func (m *SM) Restore(group uint64, index uint64, man node.Manifest, body io.Reader) error {
	var head snapshotHead
	if !man.IsEmpty() {
		if err := json.Unmarshal(man.Inline, &head); err != nil {
			return fmt.Errorf("replica: restore group %d: snapshot head: %w", group, err)
		}
		m.restores.Add(1)
	}
	head.Applied.Index = index
	if group == node.MetaGroup {
		if !man.IsEmpty() {
			m.metaRestores.Add(1)
		}
		return m.restoreMeta(head, man, body)
	}
	return m.dataSM.restore(group, man, head, body)
}

// restore replaces a data group's state with a snapshot's: head is its
// inline part, with the applied index.
func (m *dataSM) restore(group uint64, man node.Manifest, head snapshotHead, body io.Reader) error {
	if man.IsEmpty() && !m.cfg.Restored.IsZero() {
		// The initial state of a group of a restored node: the backup's
		// sessions of the group, already in Root, as they are.
		head.Applied.TS = max(head.Applied.TS, m.cfg.Restored.UnixNano())
		return m.commit(func(b *pebble.Batch) error {
			if err := setJSON(b, gkey(group, kindApplied), head.Applied); err != nil {
				return err
			}
			return b.Delete(gkey(group, kindIntent), nil)
		}, true)
	}
	if err := m.commit(func(b *pebble.Batch) error { return setJSON(b, gkey(group, kindRestoring), head.Applied) }, true); err != nil {
		return err
	}
	if err := m.replaceGroup(group, man, head, body); err != nil {
		return fmt.Errorf("replica: restore group %d: %w", group, err)
	}
	return m.commit(func(b *pebble.Batch) error {
		if err := setJSON(b, gkey(group, kindApplied), head.Applied); err != nil {
			return err
		}
		if err := b.Delete(gkey(group, kindIntent), nil); err != nil {
			return err
		}
		return b.Delete(gkey(group, kindRestoring), nil)
	}, true)
}

// replaceGroup removes the group's sessions, uploads, fences and held
// records and writes the snapshot's: its logs, objects and staged uploads
// from the body, each log's held record, and its used uploads' records and
// its fences from its state (the body's first entry; in a snapshot of the
// previous release, the head).
func (m *dataSM) replaceGroup(group uint64, man node.Manifest, head snapshotHead, body io.Reader) error {
	if err := m.removeSessions(group); err != nil {
		return err
	}
	pb := m.cfg.DB.Pebble().NewBatch()
	defer pb.Close()
	var place *batchPlace
	var sessions []SessionLength
	prepare := func(st snapshotHead) error {
		var err error
		place, err = m.clearGroup(group, pb, st)
		sessions = st.Sessions
		return err
	}
	if !chunkedState(man) {
		if err := prepare(head); err != nil {
			return err
		}
	} else if man.Entries[0].Kind != kindGroupState {
		return fmt.Errorf("the group's state is not the body's first entry")
	}
	err := man.ReadEntries(body, func(e node.ManifestEntry, r io.Reader) error {
		switch e.Kind {
		case kindGroupState:
			st, err := readGroupState(e, r)
			if err != nil {
				return err
			}
			return prepare(st)
		case kindSessionLogs:
			return readSessionLogs(sessions, e, r, func(name string, r io.Reader, n uint64) error {
				return m.restoreLog(group, place, name, r, n)
			})
		case kindSessionLog:
			return m.restoreLog(group, place, e.Name, r, e.Length)
		}
		return m.restoreBytesEntry(group, e, r, pb)
	})
	if err != nil {
		return err
	}
	if place == nil {
		return errors.New("the snapshot's body has no group state")
	}
	if err := place.record(pb); err != nil {
		return err
	}
	if err := m.cfg.DB.Commit(pb, true); err != nil {
		return err
	}
	m.placeDone(place)
	return m.syncStaging(group)
}

// clearGroup replaces the group's uploads, receipts, contents, fences and
// moving sessions with a snapshot's state's, in pb, and returns the held
// records the logs that follow are noted in.
func (m *dataSM) clearGroup(group uint64, pb *pebble.Batch, st snapshotHead) (*batchPlace, error) {
	if err := m.clearUploads(group, pb, st.Uploads); err != nil {
		return nil, err
	}
	if err := m.clearReceipts(group, pb, st.Receipts); err != nil {
		return nil, err
	}
	if err := m.clearContents(group, pb, st); err != nil {
		return nil, err
	}
	place, err := m.clearPlace(group, pb, st.Fences)
	if err != nil {
		return nil, err
	}
	return place, m.restoreMoving(group, pb, place, st.Moving)
}

// restoreLog writes one session's log from the body, n bytes, and notes it
// held by group.
func (m *dataSM) restoreLog(group uint64, place *batchPlace, name string, r io.Reader, n uint64) error {
	t, s, _ := strings.Cut(name, "/")
	dir, err := store.SessionDir(m.cfg.Root, t, s)
	if err != nil {
		return err
	}
	if g, ok := m.heldBy(name); ok && g != group {
		return m.restoreHeldElsewhere(group, g, node.ManifestEntry{Kind: kindSessionLog, Name: name, Length: n}, r, place) // move_snapshot.go
	}
	place.held[name] = true
	return store.WriteLog(dir, r, int64(n))
}

// heldSessions lists the sessions this replica holds for group.
func (m *dataSM) heldSessions(group uint64) ([]store.Session, error) {
	sessions, err := store.Sessions(m.cfg.Root, "")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(sessions, func(se store.Session) bool { return m.Holder(se.Tenant, se.Name) != group }), nil
}

func (m *dataSM) removeSessions(group uint64) error {
	sessions, err := m.heldSessions(group)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, se := range sessions {
		if err := m.closeSession(se.String()); err != nil {
			return err
		}
		dir, _ := store.SessionDir(m.cfg.Root, se.Tenant, se.Name)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	return nil
}
