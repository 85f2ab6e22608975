package replica

// A data group's snapshot naming a session this node holds for another
// group: on a node that holds both ends of a move, each group's replica
// is at its own place, and a snapshot of one end can arrive while the
// other holds the log (the destination's after the install, while this
// node's source replica has not applied the fence; the source's after an
// abort's unfence, while this node's destination replica still holds the
// install). Both logs are the one session's chain: the snapshot's is
// taken when it extends this node's, and passed over when this node's
// extends it.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"tally/cluster/node"
	"tally/store"
)

// restoreHeldElsewhere takes or passes over the snapshot's log e of a
// session this node holds for group other, reading it from r, in the
// snapshot of group being restored.
func (m *dataSM) restoreHeldElsewhere(group, other uint64, e node.ManifestEntry, r io.Reader, place *batchPlace) error {
	name := e.Name
	t, s, _ := strings.Cut(name, "/")
	local, err := m.tailPosition(t, s)
	if err != nil {
		return err
	}
	dir, err := store.SessionDir(m.cfg.Root, t, s)
	if err != nil {
		return err
	}
	n := int64(e.Length)
	common := min(local.Offset, n)
	if err := samePrefix(store.LogPath(dir), r, common); err != nil {
		return fmt.Errorf("session %s belongs to group %d, not %d, and its logs differ: %w", name, other, group, err)
	}
	var in moveIn
	fromHere, err := m.get(nameKey(other, kindMoveIn, name), &in)
	if err != nil {
		return err
	}
	fromHere = fromHere && in.From == group // other is the destination of a move from group
	take := n > local.Offset
	if n == local.Offset {
		// The same bytes: the source's snapshot leaves them to the
		// destination that installed them here (its move under way: the
		// source's writes stopped at its fence); the destination's takes
		// them unless the source here unfenced them after an abort.
		take = !fromHere && !m.unfencedAt(other, name, n)
	}
	if !take {
		_, err := io.CopyN(io.Discard, r, n-common)
		return err
	}
	m.mu.Lock()
	err = m.closeSession(name)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	// (Past its last whole line the file holds nothing a replica decided
	// on: cut it there before the snapshot's tail goes on.)
	if err := os.Truncate(store.LogPath(dir), common); err != nil {
		return err
	}
	if err := appendLog(store.LogPath(dir), r, n-common); err != nil {
		return err
	}
	place.held[name] = true
	place.move.dropHeld[name] = other
	if !fromHere {
		place.move.ins[name] = &moveIn{From: other, Shared: true}
	}
	return nil
}

// unfencedAt reports whether group, on this node, unfenced the session
// after an aborted move with its log n bytes long, and has not fenced it
// again: its log is the source's again, not a destination's copy.
func (m *dataSM) unfencedAt(group uint64, name string, n int64) bool {
	m.mu.Lock()
	_, fenced := m.moving[group][name]
	m.mu.Unlock()
	var e moveEnded
	ok, err := m.get(nameKey(group, kindMoveEnded, name), &e)
	return !fenced && err == nil && ok && e.Length == n
}

// samePrefix checks that the first n bytes of r are those of the file at
// path.
func samePrefix(path string, r io.Reader, n int64) error {
	if n == 0 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fr := bufio.NewReaderSize(f, 1<<16)
	a, b := make([]byte, 1<<16), make([]byte, 1<<16)
	for n > 0 {
		k := int(min(n, int64(len(a))))
		if _, err := io.ReadFull(fr, a[:k]); err != nil {
			return err
		}
		if _, err := io.ReadFull(r, b[:k]); err != nil {
			return err
		}
		if !bytes.Equal(a[:k], b[:k]) {
			return errors.New("the snapshot's log does not continue this node's")
		}
		n -= int64(k)
	}
	return nil
}

// appendLog appends n bytes of r to the log at path, durably.
func appendLog(path string, r io.Reader, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	written, err := io.Copy(f, io.LimitReader(r, n))
	if err == nil && written != n {
		err = fmt.Errorf("%d bytes of a %d-byte tail: the snapshot was cut short", written, n)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
