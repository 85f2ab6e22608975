package replica

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2"

	"tally/cluster/node"
	"tally/store"
)

// snapshotMagic opens every snapshot stream; it versions the format.
const snapshotMagic = "tally replica snapshot v1\n"

// maxSnapshotName bounds a session name read from a snapshot stream.
const maxSnapshotName = 256

// Snapshot writes the group's state as of its applied index: for a data
// group each of its sessions' logs, streamed from the files; for the meta
// group the membership.
//
// Stream: magic, the applied record (length-prefixed JSON), then per
// session its tenant/session and its log (each length-prefixed), then an
// empty name, then the group's bytes (snapshot_bytes.go).
func (m *SM) Snapshot(group uint64, w io.Writer) (uint64, error) {
	a, err := m.progress(group)
	if err != nil {
		return 0, err
	}
	bw := bufio.NewWriter(w)
	bw.WriteString(snapshotMagic)
	head, _ := json.Marshal(a)
	writeField(bw, head)
	if group == node.MetaGroup {
		body, _ := json.Marshal(metaState{Members: m.Members()})
		writeField(bw, body)
		return a.Index, bw.Flush()
	}
	sessions, err := store.Sessions(m.cfg.Root, "")
	if err != nil {
		return 0, err
	}
	for _, se := range sessions {
		if m.GroupOf(se.Tenant, se.Name) != group {
			continue
		}
		if err := m.snapshotSession(bw, se); err != nil {
			return 0, fmt.Errorf("replica: snapshot group %d: %w", group, err)
		}
	}
	writeField(bw, nil)
	if err := m.snapshotBytes(group, bw); err != nil {
		return 0, fmt.Errorf("replica: snapshot group %d: %w", group, err)
	}
	return a.Index, bw.Flush()
}

func (m *SM) snapshotSession(bw *bufio.Writer, se store.Session) error {
	pos, err := m.position(se.Tenant, se.Name)
	if err != nil {
		return err
	}
	if pos.Offset == 0 {
		return nil // an empty log is not a session
	}
	dir, _ := store.SessionDir(m.cfg.Root, se.Tenant, se.Name)
	f, err := os.Open(store.LogPath(dir))
	if err != nil {
		return err
	}
	defer f.Close()
	writeField(bw, []byte(se.String()))
	bw.Write(binary.AppendUvarint(nil, uint64(pos.Offset)))
	if _, err := io.CopyN(bw, f, pos.Offset); err != nil {
		return fmt.Errorf("session %s: %w", se, err)
	}
	return nil
}

func writeField(w *bufio.Writer, b []byte) {
	w.Write(binary.AppendUvarint(nil, uint64(len(b))))
	w.Write(b)
}

func readField(r *bufio.Reader, max uint64) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, fmt.Errorf("field of %d bytes exceeds %d", n, max)
	}
	b := make([]byte, n)
	_, err = io.ReadFull(r, b)
	return b, err
}

// Restore replaces the group's state with a snapshot's, durably, with
// applied = index. The empty stream is the empty state (a new group). A
// crash halfway is detected at the next start (the restoring mark) rather
// than served from.
func (m *SM) Restore(group uint64, index uint64, r io.Reader) error {
	br := bufio.NewReader(r)
	var head applied
	var body []byte
	magic := make([]byte, len(snapshotMagic))
	switch _, err := io.ReadFull(br, magic); {
	case errors.Is(err, io.EOF):
		head = applied{Index: index}
	case err != nil || string(magic) != snapshotMagic:
		return fmt.Errorf("replica: restore group %d: not a replica snapshot", group)
	default:
		m.restores.Add(1)
		hb, err := readField(br, 1<<10)
		if err == nil {
			err = json.Unmarshal(hb, &head)
		}
		if err != nil {
			return fmt.Errorf("replica: restore group %d: snapshot head: %w", group, err)
		}
		head.Index = index
	}
	if group == node.MetaGroup {
		var st metaState
		if len(magic) > 0 && string(magic) == snapshotMagic {
			var err error
			if body, err = readField(br, 64<<20); err == nil {
				err = json.Unmarshal(body, &st)
			}
			if err != nil {
				return fmt.Errorf("replica: restore meta group: %w", err)
			}
		}
		err := m.commit(func(b *pebble.Batch) error {
			if err := setJSON(b, gkey(group, kindMembers), st); err != nil {
				return err
			}
			return setJSON(b, gkey(group, kindApplied), head)
		}, true)
		if err != nil {
			return err
		}
		m.mu.Lock()
		m.members = st.Members
		m.mu.Unlock()
		if m.cfg.OnMembers != nil {
			m.cfg.OnMembers(st.Members)
		}
		return nil
	}
	if err := m.commit(func(b *pebble.Batch) error { return setJSON(b, gkey(group, kindRestoring), head) }, true); err != nil {
		return err
	}
	if err := m.replaceSessions(group, br, string(magic) == snapshotMagic); err != nil {
		return fmt.Errorf("replica: restore group %d: %w", group, err)
	}
	if err := m.restoreBytes(group, br, string(magic) == snapshotMagic); err != nil {
		return fmt.Errorf("replica: restore group %d: bytes: %w", group, err)
	}
	return m.commit(func(b *pebble.Batch) error {
		if err := setJSON(b, gkey(group, kindApplied), head); err != nil {
			return err
		}
		if err := b.Delete(gkey(group, kindIntent), nil); err != nil {
			return err
		}
		return b.Delete(gkey(group, kindRestoring), nil)
	}, true)
}

// replaceSessions removes the group's sessions and writes the stream's.
func (m *SM) replaceSessions(group uint64, br *bufio.Reader, hasBody bool) error {
	sessions, err := store.Sessions(m.cfg.Root, "")
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, se := range sessions {
		if m.GroupOf(se.Tenant, se.Name) != group {
			continue
		}
		if err := m.closeSession(se.String()); err != nil {
			return err
		}
		dir, _ := store.SessionDir(m.cfg.Root, se.Tenant, se.Name)
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	if !hasBody {
		return nil
	}
	for {
		name, err := readField(br, maxSnapshotName)
		if err != nil {
			return fmt.Errorf("session name: %w", err)
		}
		if len(name) == 0 {
			return nil
		}
		t, s, _ := strings.Cut(string(name), "/")
		dir, err := store.SessionDir(m.cfg.Root, t, s)
		if err != nil {
			return err
		}
		if g := m.GroupOf(t, s); g != group {
			return fmt.Errorf("session %s belongs to group %d, not %d", name, g, group)
		}
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return err
		}
		if err := writeLog(dir, io.LimitReader(br, int64(n)), int64(n)); err != nil {
			return fmt.Errorf("session %s: %w", name, err)
		}
	}
}

// writeLog writes a session's log from a snapshot, durably; the ledger
// verifies its chain when it opens it.
func writeLog(dir string, r io.Reader, n int64) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(store.LogPath(dir))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	if fi, err := f.Stat(); err != nil || fi.Size() != n {
		f.Close()
		return fmt.Errorf("log cut short in the snapshot stream")
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
