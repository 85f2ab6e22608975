package replica

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
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
	// Placements are the meta group's directory: tenant/session → group.
	Placements map[string]uint64 `json:"placements,omitempty"`
	// Policy is the meta group's placement policy (policy.go).
	Policy *Policy `json:"policy,omitempty"`
	// Liveness are the meta group's committed liveness facts.
	Liveness []LivenessFact `json:"liveness,omitempty"`
	// Epochs and Moves are the meta group's sessions' epochs and moves.
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
}

// Snapshot is the group's manifest as of its applied index.
func (m *SM) Snapshot(group uint64) (uint64, node.Manifest, error) {
	var head snapshotHead
	var entries []node.ManifestEntry
	var err error
	if group == node.MetaGroup {
		head, err = m.metaSM.snapshot()
	} else {
		head, entries, err = m.dataSM.snapshot(group)
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
		pos, err := m.position(se.Tenant, se.Name)
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", se, err)
		}
		if pos.Offset == 0 {
			continue // an empty log is not a session
		}
		out = append(out, node.ManifestEntry{Kind: kindSessionLog, Name: se.String(), Length: uint64(pos.Offset)})
	}
	return out, nil
}

// WriteSnapshot writes the body of a manifest Snapshot made: each
// session's log up to its length, read from the file. It touches no state
// the loop holds, so it runs on any goroutine. Only a data group's
// manifest has entries: the meta group's body is empty.
func (m *SM) WriteSnapshot(group uint64, man node.Manifest, w io.Writer) error {
	return m.dataSM.writeSnapshot(group, man, w)
}

func (m *dataSM) writeSnapshot(group uint64, man node.Manifest, w io.Writer) error {
	err := man.WriteEntries(w, func(e node.ManifestEntry, w io.Writer) error {
		if e.Kind != kindSessionLog {
			return m.writeBytesEntry(group, e, w)
		}
		return m.copyLog(e.Name, int64(e.Length), w)
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
		if len(man.Entries) > 0 {
			return fmt.Errorf("replica: restore meta group: %d entries, it has none", len(man.Entries))
		}
		return m.restoreMeta(head)
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
// its fences from the head.
func (m *dataSM) replaceGroup(group uint64, man node.Manifest, head snapshotHead, body io.Reader) error {
	if err := m.removeSessions(group); err != nil {
		return err
	}
	pb := m.cfg.DB.Pebble().NewBatch()
	defer pb.Close()
	if err := m.clearUploads(group, pb, head.Uploads); err != nil {
		return err
	}
	if err := m.clearReceipts(group, pb, head.Receipts); err != nil {
		return err
	}
	if err := m.clearContents(group, pb, head); err != nil {
		return err
	}
	place, err := m.clearPlace(group, pb, head.Fences)
	if err != nil {
		return err
	}
	if err := m.restoreMoving(group, pb, place, head.Moving); err != nil {
		return err
	}
	err = man.ReadEntries(body, func(e node.ManifestEntry, r io.Reader) error {
		if e.Kind != kindSessionLog {
			return m.restoreBytesEntry(group, e, r, pb)
		}
		t, s, _ := strings.Cut(e.Name, "/")
		dir, err := store.SessionDir(m.cfg.Root, t, s)
		if err != nil {
			return err
		}
		if g, ok := m.heldBy(e.Name); ok && g != group {
			return m.restoreHeldElsewhere(group, g, e, r, place) // move_snapshot.go
		}
		place.held[e.Name] = true
		return store.WriteLog(dir, r, int64(e.Length))
	})
	if err != nil {
		return err
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
