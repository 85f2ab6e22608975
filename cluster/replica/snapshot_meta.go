package replica

// The meta group's snapshot. Its manifest's inline head carries the small
// state (members, tokens, nonces, policy, liveness, moves, added groups)
// and the directory's ranges, each with its bounds, its count and its
// encoding's digest; the body carries each range's entries as a manifest
// entry, streamed like a session's log, so no frame carries the whole
// directory. The body is written later, on the transport's goroutine,
// from the directory as of the snapshot: a Directory is immutable, so the
// snapshot keeps it (the last few, by applied index) without copying.
// A snapshot of the previous release, its directory inline (Placements,
// Epochs), is still read.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/zeebo/blake3"

	"tally/cluster/node"
)

// kindDirRange is a manifest entry of one range of the meta group's
// directory (its name: the range's position). Sent between nodes: do not
// rename.
const kindDirRange = "dir"

// dirHead is the directory's part of the meta group's snapshot head.
type dirHead struct {
	Count  int         `json:"count"`
	Ranges []RangeInfo `json:"ranges"`
}

// keptDirectory is a snapshot's directory, kept for writing its body.
type keptDirectory struct {
	index uint64
	dir   *Directory
}

// snapshotsKept bounds the snapshots' directories kept: a body asked for
// after that many newer snapshots fails, and raft sends a newer one.
const snapshotsKept = 4

// snapshot is the meta group's snapshot head and its entries, one per
// range of the directory.
func (m *metaSM) snapshot() (snapshotHead, []node.ManifestEntry, error) {
	a, err := m.progress(node.MetaGroup)
	if err != nil {
		return snapshotHead{}, nil, err
	}
	head := snapshotHead{Applied: a}
	st := m.metaSnapshot()
	head.Members, head.Tokens, head.Nonces = st.Members, st.Tokens, st.Nonces
	if !st.Policy.isZero() {
		head.Policy = &st.Policy
	}
	head.Liveness = st.Liveness
	head.Moves, head.Added = st.Moves, st.Added
	dh := &dirHead{Count: st.Dir.Len(), Ranges: st.Dir.Ranges()}
	var entries []node.ManifestEntry
	for i, r := range st.Dir.rangeList() {
		size, digest := r.encoded()
		dh.Ranges[i].Digest = digest
		entries = append(entries, node.ManifestEntry{Kind: kindDirRange, Name: strconv.Itoa(i), Length: size})
	}
	head.Directory = dh
	m.keep(a.Index, st.Dir)
	return head, entries, nil
}

// keep keeps a snapshot's directory, dropping the oldest past
// snapshotsKept.
func (m *metaSM) keep(index uint64, dir *Directory) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.snaps = slices.DeleteFunc(m.snaps, func(k keptDirectory) bool { return k.index == index })
	m.snaps = append(m.snaps, keptDirectory{index: index, dir: dir})
	if len(m.snaps) > snapshotsKept {
		m.snaps = slices.Delete(m.snaps, 0, len(m.snaps)-snapshotsKept)
	}
}

// kept is the directory of the snapshot at index, if still kept.
func (m *metaSM) kept(index uint64) (*Directory, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range m.snaps {
		if k.index == index {
			return k.dir, true
		}
	}
	return nil, false
}

// writeSnapshot writes the body of the meta group's manifest: each range's
// entries, from the directory the snapshot kept.
func (m *metaSM) writeSnapshot(man node.Manifest, w io.Writer) error {
	if len(man.Entries) == 0 {
		return nil
	}
	var head snapshotHead
	if err := json.Unmarshal(man.Inline, &head); err != nil {
		return fmt.Errorf("replica: snapshot meta group: head: %w", err)
	}
	dir, ok := m.kept(head.Applied.Index)
	if !ok {
		return fmt.Errorf("replica: snapshot meta group at %d: its directory is no longer kept (newer snapshots were taken)", head.Applied.Index)
	}
	ranges := dir.rangeList()
	err := man.WriteEntries(w, func(e node.ManifestEntry, w io.Writer) error {
		i, err := strconv.Atoi(e.Name)
		if e.Kind != kindDirRange || err != nil || i < 0 || i >= len(ranges) {
			return fmt.Errorf("not a range of the directory's %d", len(ranges))
		}
		bw := bufio.NewWriter(w)
		var buf []byte
		for _, de := range ranges[i].entries {
			buf = appendDirEntry(buf[:0], de)
			if _, err := bw.Write(buf); err != nil {
				return err
			}
		}
		return bw.Flush()
	})
	if err != nil {
		return fmt.Errorf("replica: snapshot meta group: %w", err)
	}
	return nil
}

// restoreMeta replaces the meta group's state with a snapshot's: head is
// its inline part, with the applied index; the directory's ranges are read
// from the body (or, from a snapshot of the previous release, the head).
func (m *metaSM) restoreMeta(head snapshotHead, man node.Manifest, body io.Reader) error {
	st := metaState{Members: head.Members, Tokens: head.Tokens, Nonces: head.Nonces}
	if head.Policy != nil {
		st.Policy = *head.Policy
	}
	st.Liveness = head.Liveness
	st.Moves, st.Added = head.Moves, head.Added
	var err error
	if head.Directory != nil {
		st.Dir, err = readDirectory(ruleOf(m.cfg), *head.Directory, man, body)
	} else {
		st.Dir, err = inlineDirectory(ruleOf(m.cfg), head, man)
	}
	if err != nil {
		return fmt.Errorf("replica: restore meta group: %w", err)
	}
	if err := m.saveMeta(st, head.Applied, nil, true); err != nil {
		return err
	}
	if m.cfg.OnMembers != nil {
		m.cfg.OnMembers(st.Members)
	}
	return nil
}

// inlineDirectory is the directory of a snapshot of the previous release:
// its placements and epochs inline, no entries.
func inlineDirectory(rule rangeRule, head snapshotHead, man node.Manifest) (*Directory, error) {
	if len(man.Entries) > 0 {
		return nil, fmt.Errorf("%d entries, and no directory in the head", len(man.Entries))
	}
	return directoryOf(rule, head.Placements, head.Epochs), nil
}

// readDirectory reads the directory's ranges from a snapshot's body,
// checking each against the head: its entries in order and within its
// bounds, its count, and its digest.
func readDirectory(rule rangeRule, dh dirHead, man node.Manifest, body io.Reader) (*Directory, error) {
	if len(man.Entries) != len(dh.Ranges) {
		return nil, fmt.Errorf("%d entries for the directory's %d ranges", len(man.Entries), len(dh.Ranges))
	}
	entries := make([]DirEntry, 0, dh.Count)
	err := man.ReadEntries(body, func(e node.ManifestEntry, r io.Reader) error {
		i, err := strconv.Atoi(e.Name)
		if e.Kind != kindDirRange || err != nil || i < 0 || i >= len(dh.Ranges) {
			return fmt.Errorf("not one of the directory's %d ranges", len(dh.Ranges))
		}
		got, err := readRange(dh.Ranges[i], r)
		if err != nil {
			return fmt.Errorf("range %d: %w", i, err)
		}
		if len(entries) > 0 && len(got) > 0 && got[0].Name <= entries[len(entries)-1].Name {
			return fmt.Errorf("range %d: out of order", i)
		}
		entries = append(entries, got...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(entries) != dh.Count {
		return nil, fmt.Errorf("%d entries, the head says %d", len(entries), dh.Count)
	}
	return newDirectoryRule(rule, entries), nil
}

// readRange reads one range's entries from r (exactly its bytes).
func readRange(ri RangeInfo, r io.Reader) ([]DirEntry, error) {
	h := blake3.NewDeriveKey(dirDigestContext)
	br := bufio.NewReader(io.TeeReader(r, h))
	out := make([]DirEntry, 0, ri.Count)
	for {
		if _, err := br.Peek(1); errors.Is(err, io.EOF) {
			break
		}
		e, err := readDirEntry(br)
		if err != nil {
			return nil, err
		}
		switch {
		case len(out) >= ri.Count:
			return nil, fmt.Errorf("more than its %d entries", ri.Count)
		case e.Name < ri.Start || (ri.End != "" && e.Name >= ri.End):
			return nil, fmt.Errorf("%q is outside its bounds [%q, %q)", e.Name, ri.Start, ri.End)
		case len(out) > 0 && e.Name <= out[len(out)-1].Name:
			return nil, fmt.Errorf("%q is out of order", e.Name)
		}
		out = append(out, e)
	}
	if len(out) != ri.Count {
		return nil, fmt.Errorf("%d entries, the head says %d", len(out), ri.Count)
	}
	if got := fmt.Sprintf("%x", h.Sum(nil)); got != ri.Digest {
		return nil, fmt.Errorf("digest %s, the head says %s", got, ri.Digest)
	}
	return out, nil
}

// maxDirName bounds a directory entry's name when read: two names of 64
// and the slash between.
const maxDirName = 129

func readDirEntry(r *bufio.Reader) (DirEntry, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return DirEntry{}, fmt.Errorf("name: %w", err)
	}
	if n == 0 || n > maxDirName {
		return DirEntry{}, fmt.Errorf("a name of %d bytes", n)
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(r, name); err != nil {
		return DirEntry{}, fmt.Errorf("name: %w", err)
	}
	e := DirEntry{Name: string(name)}
	if e.Group, err = binary.ReadUvarint(r); err != nil {
		return DirEntry{}, fmt.Errorf("group of %q: %w", e.Name, err)
	}
	if e.Epoch, err = binary.ReadUvarint(r); err != nil {
		return DirEntry{}, fmt.Errorf("epoch of %q: %w", e.Name, err)
	}
	return e, nil
}
