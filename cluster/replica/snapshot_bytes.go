package replica

// The bytes a data group's snapshot carries after its sessions, so that a
// node installing it holds what the group's replicas hold: the content
// store's objects that the group's artifacts record (and that its used
// uploads were), and its uploads, each staged one with its bytes and each
// used one with its record. Each is an entry: a kind, a name, a length and
// that many bytes; a zero kind ends them. A stream that ends before them
// (an older node's) carries none.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"tally/artifact"
	"tally/claim"
	"tally/digest"
	"tally/ledger"
	"tally/service"
	"tally/store"
)

// Byte entries' kinds. Stored in snapshots: do not renumber.
const (
	entryEnd    byte = 0
	entryObject byte = 'o' // name: the content digest; bytes: the object
	entryStaged byte = 's' // name: the upload id; bytes: what it staged
	entryUsed   byte = 'u' // name: the upload id; bytes: its record (JSON)
)

// maxUsedRecord bounds a used upload's record read from a snapshot.
const maxUsedRecord = 1 << 10

// snapshotBytes writes the group's byte entries after its sessions.
func (m *SM) snapshotBytes(group uint64, bw *bufio.Writer) error {
	objs, err := artifact.OpenStore(store.ObjectsDir(m.cfg.Root))
	if err != nil {
		return err
	}
	contents, err := m.groupContents(group)
	if err != nil {
		return err
	}
	for _, d := range contents {
		if err := m.snapshotObject(bw, objs, d); err != nil {
			return err
		}
	}
	err = m.eachUpload(group, func(id string, r uploadRecord) error {
		if r.used() {
			body, _ := json.Marshal(r)
			return writeEntry(bw, entryUsed, id, int64(len(body)), bytes.NewReader(body))
		}
		f, err := os.Open(filepath.Join(m.stagingDir(group), id))
		if err != nil {
			return fmt.Errorf("upload %s: %w", id, err)
		}
		defer f.Close()
		return writeEntry(bw, entryStaged, id, r.Size, f)
	})
	if err != nil {
		return err
	}
	return bw.WriteByte(entryEnd)
}

// snapshotObject writes one object, verified first. A copy missing or
// damaged here is left out (and logged): the node that installs the
// snapshot lists it missing, as this one should.
func (m *SM) snapshotObject(bw *bufio.Writer, objs *artifact.Store, d digest.ContentDigest) error {
	rc, err := objs.Open(context.Background(), d)
	if err != nil {
		m.log.Warn("replica: snapshot leaves out an object this node cannot read whole", "content", d.String(), "err", err)
		return nil
	}
	defer rc.Close()
	fi, err := os.Stat(objs.Path(d))
	if err != nil {
		return err
	}
	return writeEntry(bw, entryObject, d.String(), fi.Size(), rc)
}

// groupContents is every content the group's replicas hold in the content
// store for it: its sessions' artifacts and its used uploads, sorted.
func (m *SM) groupContents(group uint64) ([]digest.ContentDigest, error) {
	set := map[string]bool{}
	sessions, err := store.Sessions(m.cfg.Root, "")
	if err != nil {
		return nil, err
	}
	for _, se := range sessions {
		if m.GroupOf(se.Tenant, se.Name) != group {
			continue
		}
		if err := m.sessionContents(se, set); err != nil {
			return nil, fmt.Errorf("session %s: %w", se, err)
		}
	}
	err = m.eachUpload(group, func(_ string, r uploadRecord) error {
		if r.used() {
			set[r.Content] = true
		}
		return nil
	})
	var out []digest.ContentDigest
	for _, s := range slices.Sorted(maps.Keys(set)) {
		d, perr := digest.ParseContentDigest(s)
		if perr != nil {
			return nil, fmt.Errorf("recorded content %q: %w", s, perr)
		}
		out = append(out, d)
	}
	return out, err
}

// sessionContents adds the contents a session's artifacts record to set.
func (m *SM) sessionContents(se store.Session, set map[string]bool) error {
	l, err := m.Open(context.Background(), se.Tenant, se.Name, false)
	if err != nil {
		return err
	}
	var rows []claim.StoredArtifact
	l.Read(func(st *ledger.State) { rows, err = service.ArtifactRows(st, "", m.Now()) })
	for _, r := range rows {
		set[r.Content] = true
	}
	return err
}

func writeEntry(bw *bufio.Writer, kind byte, name string, n int64, r io.Reader) error {
	bw.WriteByte(kind)
	writeField(bw, []byte(name))
	bw.Write(binary.AppendUvarint(nil, uint64(n)))
	if _, err := io.CopyN(bw, r, n); err != nil {
		return fmt.Errorf("snapshot entry %c %s: %w", kind, name, err)
	}
	return nil
}

// restoreBytes replaces the group's uploads with the stream's and puts its
// objects in the content store, each verified against its name; hasBody
// false is the empty state.
func (m *SM) restoreBytes(group uint64, br *bufio.Reader, hasBody bool) error {
	pb := m.cfg.DB.Pebble().NewBatch()
	defer pb.Close()
	err := m.eachUpload(group, func(id string, _ uploadRecord) error { return pb.Delete(uploadKey(group, id), nil) })
	if err != nil {
		return err
	}
	if err := os.RemoveAll(m.stagingDir(group)); err != nil {
		return err
	}
	for hasBody {
		kind, err := br.ReadByte()
		if errors.Is(err, io.EOF) || kind == entryEnd {
			break
		}
		if err != nil {
			return err
		}
		if err := m.restoreEntry(group, kind, br, pb); err != nil {
			return err
		}
	}
	if err := m.cfg.DB.Commit(pb, true); err != nil {
		return err
	}
	if _, err := os.Stat(m.stagingDir(group)); err == nil {
		return syncDir(m.stagingDir(group))
	}
	return nil
}

// restoreEntry reads one byte entry of kind.
func (m *SM) restoreEntry(group uint64, kind byte, br *bufio.Reader, pb *pebble.Batch) error {
	name, err := readField(br, maxSnapshotName)
	if err != nil {
		return fmt.Errorf("byte entry name: %w", err)
	}
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return err
	}
	body := io.LimitReader(br, int64(n))
	switch kind {
	case entryObject:
		return m.restoreObject(string(name), body, int64(n))
	case entryStaged:
		if _, err := uploadStart(string(name)); err != nil {
			return err
		}
		if err := m.restoreStaged(group, string(name), body, int64(n)); err != nil {
			return err
		}
		return setJSON(pb, uploadKey(group, string(name)), uploadRecord{Size: int64(n)})
	case entryUsed:
		if _, err := uploadStart(string(name)); err != nil {
			return err
		}
		if n > maxUsedRecord {
			return fmt.Errorf("upload %s: a record of %d bytes", name, n)
		}
		b, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		return pb.Set(uploadKey(group, string(name)), b, nil)
	}
	return fmt.Errorf("a byte entry of unknown kind %q", kind)
}

// restoreObject puts one object in the content store: the bytes must be
// the content its name says.
func (m *SM) restoreObject(name string, r io.Reader, n int64) error {
	want, err := digest.ParseContentDigest(name)
	if err != nil {
		return fmt.Errorf("object %q: %w", name, err)
	}
	objs, err := artifact.OpenStore(store.ObjectsDir(m.cfg.Root))
	if err != nil {
		return err
	}
	got, size, err := objs.Put(context.Background(), r)
	if err != nil {
		return err
	}
	if got != want || size != n {
		return fmt.Errorf("object %s: the snapshot's %d bytes are content %s", want, size, got)
	}
	return nil
}

// restoreStaged writes one staged upload's bytes, durably.
func (m *SM) restoreStaged(group uint64, id string, r io.Reader, n int64) error {
	dir := m.stagingDir(group)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, id))
	if err != nil {
		return err
	}
	written, err := io.Copy(f, r)
	if err == nil && written != n {
		err = fmt.Errorf("upload %s cut short in the snapshot stream", id)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}
