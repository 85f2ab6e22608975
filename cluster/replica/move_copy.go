package replica

// A move's copy stream: a destination node stages the source's log, which
// a source replica serves.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"tally/backup"
	"tally/refuse"
	"tally/store"
)

// stagedPath is where a node stages the copy of a session it is to
// receive, beside the sessions.
func (m *dataSM) stagedPath(tenant, session string) string {
	return filepath.Join(m.cfg.Root, "moves", tenant, session+".jsonl")
}

// Stage brings this node's staged copy of a session moving from group up
// to length upto (the source's log at some instant), fetched from a
// source replica and verified line by line, and returns where it ends. A
// node that holds the source group holds the log already: nothing is
// staged, and its log's end is answered.
func (sm *SM) Stage(ctx context.Context, tenant, session string, from uint64, upto int64) (LogEnd, error) {
	m := sm.dataSM
	name := tenant + "/" + session
	if _, err := store.SessionDir(m.cfg.Root, tenant, session); err != nil {
		return LogEnd{}, err
	}
	if g, ok := m.heldBy(name); (ok && g == from) || (!ok && GroupOf(m.cfg.Groups, tenant, session) == from && m.hasLog(tenant, session)) {
		pos, err := m.tailPosition(tenant, session)
		if err == nil {
			dir, _ := store.SessionDir(m.cfg.Root, tenant, session)
			m.scanAhead(tenant, session, store.LogPath(dir))
		}
		return logEnd(pos), err
	}
	pos, err := m.stageFile(ctx, m.stagedPath(tenant, session), tenant, session, from, upto)
	if err == nil {
		m.scanAhead(tenant, session, m.stagedPath(tenant, session))
	}
	return logEnd(pos), err
}

func (m *dataSM) hasLog(tenant, session string) bool {
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	return err == nil && store.HasLog(dir)
}

// Unstage removes this node's staged copy of a session, if any.
func (sm *SM) Unstage(tenant, session string) error {
	m := sm.dataSM
	m.forgetStaged(m.stagedPath(tenant, session))
	err := os.Remove(m.stagedPath(tenant, session))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// forgetStaged drops what stageFile knows of the staged copy at path.
func (m *dataSM) forgetStaged(path string) {
	m.stageMu.Lock()
	delete(m.stagedAt, path)
	m.stageMu.Unlock()
}

// stageFile verifies the log at path (a torn last line is cut) and
// appends to it, from a replica of group from, what it lacks up to upto,
// each line verified against the chain as it arrives; the file is synced.
// It returns where the verified log ends.
func (m *dataSM) stageFile(ctx context.Context, path, tenant, session string, from uint64, upto int64) (store.Position, error) {
	// One stage at a time on a node: a mover's and an install's, or two
	// movers' across a change of the meta group's leader, never append
	// to one file together.
	m.stageMu.Lock()
	defer m.stageMu.Unlock()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return store.Position{}, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return store.Position{}, err
	}
	defer f.Close()
	// A staged copy this node verified already goes on from where it
	// ended (the catch-up, the tail after the fence, the install), rather
	// than be read and verified whole again.
	start := store.Position{}
	staged := strings.HasPrefix(path, filepath.Join(m.cfg.Root, "moves")+string(filepath.Separator))
	if p, ok := m.stagedAt[path]; ok && staged && p.Offset <= upto {
		if fi, err := f.Stat(); err == nil && fi.Size() >= p.Offset {
			start = p
		}
	}
	delete(m.stagedAt, path)
	if _, err := f.Seek(start.Offset, io.SeekStart); err != nil {
		return store.Position{}, err
	}
	ch := store.ChainFrom(start)
	r := bufio.NewReaderSize(f, 1<<16)
	for ch.Position().Offset < upto {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return store.Position{}, err
		}
		if _, err := ch.Next(line[:len(line)-1]); err != nil {
			return store.Position{}, fmt.Errorf("staged copy of %s/%s: line %d: %w", tenant, session, ch.Position().Seq+1, err)
		}
	}
	pos := ch.Position()
	if err := f.Truncate(pos.Offset); err != nil {
		return store.Position{}, err
	}
	if pos.Offset < upto {
		if m.cfg.Fetch == nil {
			return store.Position{}, errors.New("replica: no way to fetch a session's log from another node")
		}
		if _, err := f.Seek(pos.Offset, io.SeekStart); err != nil {
			return store.Position{}, err
		}
		vw := &verifyingWriter{ch: ch, w: bufio.NewWriterSize(&syncingFile{f: f}, 1<<16)}
		err := m.cfg.Fetch(ctx, from, tenant, session, pos.Offset, upto, vw)
		if ferr := vw.w.Flush(); err == nil {
			err = ferr
		}
		if err == nil && len(vw.part) > 0 {
			err = fmt.Errorf("the copy ends in the middle of a line")
		}
		if err != nil {
			// Keep the whole lines verified so far: the next stage goes on
			// from them.
			_ = f.Truncate(ch.Position().Offset)
			return store.Position{}, fmt.Errorf("fetch %s/%s from group %d: %w", tenant, session, from, err)
		}
		pos = ch.Position()
	}
	if err := f.Sync(); err != nil {
		return store.Position{}, err
	}
	if staged {
		if m.stagedAt == nil {
			m.stagedAt = map[string]store.Position{}
		}
		m.stagedAt[path] = pos
	}
	return pos, nil
}

// verifyingWriter passes on whole lines that continue the chain.
// stageSyncEvery bounds the copy a stage writes before it syncs it: one
// sync of a whole large copy at its end would hold the disk, and every
// other session's commit waiting on its own sync behind it, for as long
// as that takes.
const stageSyncEvery = 8 << 20

// syncingFile syncs f after every stageSyncEvery bytes written to it.
type syncingFile struct {
	f *os.File
	n int64
}

func (s *syncingFile) Write(p []byte) (int, error) {
	n, err := s.f.Write(p)
	if s.n += int64(n); err == nil && s.n >= stageSyncEvery {
		s.n, err = 0, s.f.Sync()
	}
	return n, err
}

type verifyingWriter struct {
	ch   *store.Chain
	w    *bufio.Writer
	part []byte
}

func (v *verifyingWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			v.part = append(v.part, p...)
			break
		}
		line := p[:i]
		if len(v.part) > 0 {
			line = append(v.part, line...)
		}
		if _, err := v.ch.Next(line); err != nil {
			return 0, fmt.Errorf("line %d: %w", v.ch.Position().Seq+1, err)
		}
		if _, err := v.w.Write(line); err != nil {
			return 0, err
		}
		if err := v.w.WriteByte('\n'); err != nil {
			return 0, err
		}
		v.part, p = v.part[:0], p[i+1:]
	}
	return n, nil
}

// ReadLog writes the bytes [from, to) of the session's log as this node's
// replica of group holds it: refused if the node does not hold the
// session for that group, or holds less of it.
func (sm *SM) ReadLog(group uint64, tenant, session string, from, to int64, w io.Writer) error {
	m := sm.dataSM
	name := tenant + "/" + session
	if g := m.Holder(tenant, session); g != group {
		// A log moved here from group holds group's log up to the fence.
		var in moveIn
		if ok, err := m.get(nameKey(g, kindMoveIn, name), &in); err != nil || !ok || in.From != group {
			return refuse.Conflictf("group", fmt.Sprintf("node holds %s for group %d, not group %d", name, g, group))
		}
	}
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return err
	}
	f, err := os.Open(store.LogPath(dir))
	if err != nil {
		return refuse.NotFoundf("session", fmt.Sprintf("node holds no log of %s", name))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < to || from > to || from < 0 {
		return refuse.Conflictf("length", fmt.Sprintf("node holds %d bytes of %s, not %d", fi.Size(), name, to))
	}
	_, err = io.Copy(w, io.NewSectionReader(f, from, to-from))
	return err
}

// tailPosition is where the session's log ends on this node: its open
// ledger's position, else its file's last whole line, read without
// folding the log. A move's probe, fence and install run in the apply
// loop, and opening a session of a million events there to learn its end
// folded it whole first: seconds during which the group applied nothing,
// and the move stalled past MoveStallMax at its fence.
func (m *dataSM) tailPosition(tenant, session string) (store.Position, error) {
	return m.logEnd(tenant, session, func(dir string) (store.Position, error) {
		return backup.TailCut(context.Background(), dir)
	})
}
