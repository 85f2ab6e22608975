package replica

// The bytes a data group's snapshot carries beside its sessions' logs, so
// that a node installing it holds what the group's replicas hold: the
// content store's objects that the group's artifacts record (and that its
// used uploads were), its staged uploads' bytes, and its used uploads'
// records (inline, in the snapshot's head). Objects are named by their
// content and never change; a staged upload only grows, at offsets, so
// the prefix of the size its record had when the manifest was taken never
// changes either: both may be read later, as the logs are. A staged upload
// used (and its file removed) before the body is written fails the
// stream, and raft sends a newer snapshot.

import (
	"context"
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
	"tally/cluster/node"
	"tally/digest"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/store"
)

// Manifest entry kinds of the group's bytes; sent between nodes: do not
// rename.
const (
	kindObject = "object" // name: the content digest; bytes: the object
	kindStaged = "staged" // name: the upload id; bytes: what it staged
)

// byteEntries lists the group's objects and staged uploads, and returns
// its used uploads' records, for the snapshot's head.
func (m *dataSM) byteEntries(group uint64) ([]node.ManifestEntry, map[string]uploadRecord, error) {
	objs, err := artifact.OpenStore(store.ObjectsDir(m.cfg.Root))
	if err != nil {
		return nil, nil, err
	}
	contents, err := m.groupContents(group)
	if err != nil {
		return nil, nil, err
	}
	// Bytes that travel beside the log are fetched by the node installing
	// the snapshot, from their holders (content.go): only those staged
	// through the log, which no holder names, travel in it.
	beside := map[string]bool{}
	err = m.eachContent(group, func(content string, r contentRecord) error {
		beside[content] = len(r.Holders) > 0
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	var out []node.ManifestEntry
	for _, d := range contents {
		if beside[d.String()] {
			continue
		}
		fi, err := os.Stat(objs.Path(d))
		if err != nil {
			// Left out: the node that installs the snapshot lists it
			// missing, as this one should.
			m.log.Warn("replica: snapshot leaves out an object this node does not hold", "content", d.String(), "err", err)
			continue
		}
		out = append(out, node.ManifestEntry{Kind: kindObject, Name: d.String(), Length: uint64(fi.Size())})
	}
	used := map[string]uploadRecord{}
	err = m.eachUpload(group, func(id string, r uploadRecord) error {
		if r.used() {
			used[id] = r
			return nil
		}
		out = append(out, node.ManifestEntry{Kind: kindStaged, Name: id, Length: uint64(r.Size)})
		return nil
	})
	return out, used, err
}

// writeBytesEntry writes the bytes of an object or staged upload entry.
func (m *dataSM) writeBytesEntry(group uint64, e node.ManifestEntry, w io.Writer) error {
	var r io.ReadCloser
	switch e.Kind {
	case kindObject:
		d, err := digest.ParseContentDigest(e.Name)
		if err != nil {
			return fmt.Errorf("object %q: %w", e.Name, err)
		}
		objs, err := artifact.OpenStore(store.ObjectsDir(m.cfg.Root))
		if err != nil {
			return err
		}
		if r, err = objs.Open(context.Background(), d); err != nil {
			return err
		}
	case kindStaged:
		f, err := os.Open(filepath.Join(m.stagingDir(group), e.Name))
		if err != nil {
			return fmt.Errorf("upload %s: %w", e.Name, err)
		}
		r = f
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	defer r.Close()
	switch n, err := io.CopyN(w, r, int64(e.Length)); {
	case errors.Is(err, io.EOF):
		return fmt.Errorf("%s %s holds %d bytes, fewer than the %d the snapshot names", e.Kind, e.Name, n, e.Length)
	case err != nil:
		return err
	}
	return nil
}

// groupContents is every content the group's replicas hold in the content
// store for it: its sessions' artifacts and its used uploads, sorted.
func (m *dataSM) groupContents(group uint64) ([]digest.ContentDigest, error) {
	set := map[string]bool{}
	sessions, err := m.heldSessions(group)
	if err != nil {
		return nil, err
	}
	for _, se := range sessions {
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
func (m *dataSM) sessionContents(se store.Session, set map[string]bool) error {
	return m.readSession(se.Tenant, se.Name, func(l *ledger.Ledger) error {
		var rows []claim.StoredArtifact
		var err error
		l.Read(func(st *ledger.State) { rows, err = ledgerservice.ArtifactRows(st, "", m.Now()) })
		for _, r := range rows {
			set[r.Content] = true
		}
		return err
	})
}

// clearUploads replaces the group's uploads: their records (the used
// ones the head carries, the staged ones as their entries arrive, in pb)
// and their staging files.
func (m *dataSM) clearUploads(group uint64, pb *pebble.Batch, used map[string]uploadRecord) error {
	delete(m.noUploads, group) // the snapshot's records are written: scan again
	err := m.eachUpload(group, func(id string, _ uploadRecord) error { return pb.Delete(uploadKey(group, id), nil) })
	if err != nil {
		return err
	}
	if err := os.RemoveAll(m.stagingDir(group)); err != nil {
		return err
	}
	for _, id := range slices.Sorted(maps.Keys(used)) {
		if _, err := uploadStart(id); err != nil {
			return err
		}
		if err := setJSON(pb, uploadKey(group, id), used[id]); err != nil {
			return err
		}
	}
	return nil
}

// restoreBytesEntry installs one object or staged upload from the body.
func (m *dataSM) restoreBytesEntry(group uint64, e node.ManifestEntry, r io.Reader, pb *pebble.Batch) error {
	switch e.Kind {
	case kindObject:
		return m.restoreObject(e.Name, r, int64(e.Length))
	case kindStaged:
		if _, err := uploadStart(e.Name); err != nil {
			return err
		}
		if err := m.restoreStaged(group, e.Name, r, int64(e.Length)); err != nil {
			return err
		}
		delete(m.noUploads, group)
		return setJSON(pb, uploadKey(group, e.Name), uploadRecord{Size: int64(e.Length)})
	}
	return fmt.Errorf("unknown kind %q", e.Kind)
}

// restoreObject puts one object in the content store: the bytes must be
// the content its name says.
func (m *dataSM) restoreObject(name string, r io.Reader, n int64) error {
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
func (m *dataSM) restoreStaged(group uint64, id string, r io.Reader, n int64) error {
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
		err = fmt.Errorf("upload %s cut short in the snapshot body", id)
	}
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

// syncStaging makes the group's staging directory's entries durable.
func (m *dataSM) syncStaging(group uint64) error {
	if _, err := os.Stat(m.stagingDir(group)); err == nil {
		return store.SyncDir(m.stagingDir(group))
	}
	return nil
}
