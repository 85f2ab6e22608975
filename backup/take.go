package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"tally/artifact"
	"tally/digest"
	"tally/store"
)

// CutFunc says where a session's backup ends, given its directory: a whole
// line at or after every write acknowledged before the backup began.
type CutFunc func(ctx context.Context, dir string) (store.Position, error)

// SettledCut is the cut of a session of a ledger directory that other
// processes may be writing: the end of its durable lines (store.Settled),
// which holds every acknowledged write and nothing a writer may still cut
// back. Writers are held up for a stat, no longer.
func SettledCut(ctx context.Context, dir string) (store.Position, error) {
	lg, err := store.Open(dir, nil)
	if err != nil {
		return store.Position{}, err
	}
	defer lg.Close()
	return lg.Settled(ctx)
}

// TailCut is the cut of a session whose every whole line is final once
// written: a cluster replica's, whose lines are committed entries applied
// (a batch a crash interrupts is written again to the same bytes). It
// takes no lock.
func TailCut(_ context.Context, dir string) (store.Position, error) {
	f, err := os.Open(store.LogPath(dir))
	if err != nil {
		return store.Position{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return store.Position{}, err
	}
	return store.Tail(f, fi.Size())
}

// Take writes a backup of the ledger directory root to dst: each session
// with a line, up to where cut says, then the objects they name from
// root's content store. The sessions are listed when Take starts, so a
// caller that needs a session created before the backup to be there makes
// it visible first (a cluster node reads every group at a linearizable
// point).
func Take(ctx context.Context, dst io.Writer, h Header, root string, cut CutFunc) (Summary, error) {
	return TakeGrouped(ctx, dst, h, root, cut, nil)
}

// GroupFunc names a cluster session's data group for its Cut.Group (0:
// the one its name hashes to).
type GroupFunc func(tenant, session string) uint64

// TakeGrouped is Take with each session's group, when group is not nil.
func TakeGrouped(ctx context.Context, dst io.Writer, h Header, root string, cut CutFunc, group GroupFunc) (Summary, error) {
	w, err := NewWriter(dst, h)
	if err != nil {
		return Summary{}, err
	}
	sessions, err := store.Sessions(root, "")
	if err != nil {
		return Summary{}, err
	}
	for _, se := range sessions {
		if err := ctx.Err(); err != nil {
			return Summary{}, err
		}
		dir, err := store.SessionDir(root, se.Tenant, se.Name)
		if err != nil {
			return Summary{}, err
		}
		pos, err := cut(ctx, dir)
		if err != nil {
			return Summary{}, fmt.Errorf("backup session %s: cut: %w", se, err)
		}
		if pos.Seq == 0 {
			continue // no line yet: not a session
		}
		var g uint64
		if group != nil {
			g = group(se.Tenant, se.Name)
		}
		if err := copySession(ctx, w, se, dir, pos, g); err != nil {
			return Summary{}, err
		}
	}
	objects := store.ObjectsDir(root)
	for _, d := range w.Pending() {
		f, err := os.Open(artifact.ObjectPath(objects, d))
		if errors.Is(err, os.ErrNotExist) {
			return Summary{}, fmt.Errorf("backup object %s: named by the sessions, missing from %s", d, objects)
		}
		if err != nil {
			return Summary{}, fmt.Errorf("backup object %s: %w", d, err)
		}
		err = copyObject(ctx, w, d, f)
		f.Close()
		if err != nil {
			return Summary{}, err
		}
	}
	return w.Close()
}

func copySession(ctx context.Context, w *Writer, se store.Session, dir string, pos store.Position, group uint64) error {
	f, err := os.Open(store.LogPath(dir))
	if err != nil {
		return fmt.Errorf("backup session %s: %w", se, err)
	}
	defer f.Close()
	c := Cut{Tenant: se.Tenant, Session: se.Name, Seq: pos.Seq, Hash: pos.Hash, Bytes: pos.Offset, Group: group}
	return closedOnDone(ctx, f, func() error { return w.Session(c, io.NewSectionReader(f, 0, pos.Offset)) })
}

func copyObject(ctx context.Context, w *Writer, d digest.ContentDigest, f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("backup object %s: %w", d, err)
	}
	return closedOnDone(ctx, f, func() error { return w.Object(d, fi.Size(), f) })
}

// closedOnDone runs run, which reads f, and stops it when ctx ends by
// closing f under it; it then returns ctx's error.
func closedOnDone(ctx context.Context, f *os.File, run func() error) error {
	stop := context.AfterFunc(ctx, func() { f.Close() })
	err := run()
	if !stop() {
		return ctx.Err()
	}
	return err
}
