package replica

// A move's install in the destination group: the staged copy completed,
// verified and made the session's log.

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"tally/claim"
	"tally/digest"
	"tally/ledger"
	"tally/ledgerservice"
	"tally/refuse"
	"tally/store"
)

// moveInstall makes the session the destination group's on this replica,
// its log the source's up to the fenced end.
func (m *dataSM) moveInstall(b *batchPlace, c Command, d MoveDoc) Outcome {
	name := c.Tenant + "/" + c.Session
	want, err := d.end()
	if err != nil {
		return Outcome{Err: err}
	}
	if g, ok := m.heldHere(b, name); ok && g == b.group {
		pos, err := m.tailPosition(c.Tenant, c.Session)
		if err != nil {
			return Outcome{Err: err}
		}
		return Outcome{Value: logEnd(pos)} // installed already
	}
	if d.Move != 0 {
		// A late install of a move that ended: dropped here, or, on a node
		// that holds the source too, unfenced there (the source takes the
		// session's writes again; its log is not this move's any more).
		for _, g := range []uint64{b.group, d.From} {
			ended, err := m.moveEndedIn(b, g, name)
			if err != nil {
				return Outcome{Err: err}
			}
			if ended == d.Move {
				return Outcome{Err: refuse.Conflictf("move", fmt.Sprintf("move %d of %s was aborted: group %d took the session back", d.Move, name, d.From))}
			}
		}
	}
	in := &moveIn{From: d.From, Move: d.Move}
	g, ok := m.heldHere(b, name)
	if !ok && GroupOf(m.cfg.Groups, c.Tenant, c.Session) == d.From && m.hasLog(c.Tenant, c.Session) {
		// A log with no held record (a restored backup's, or written
		// before held records) is its hash's group's, as Holder says.
		g, ok = d.From, true
	}
	if ok && g == d.From {
		// The node holds the source group too: its log is the source's.
		in.Shared = true
		if err := m.completeShared(c.Tenant, c.Session, d.From, want); err != nil {
			return Outcome{Err: fmt.Errorf("%w: %w", errMoveCopy, err)}
		}
		b.move.dropHeld[name] = d.From
	} else if err := m.installStaged(c.Tenant, c.Session, d.From, want); err != nil {
		return Outcome{Err: fmt.Errorf("%w: %w", errMoveCopy, err)}
	}
	if err := m.moveContents(c, d); err != nil {
		return Outcome{Err: fmt.Errorf("%w: %w", errMoveCopy, err)}
	}
	b.held[name] = true
	b.move.ins[name] = in
	if _, ok := m.fencedTo(b, name); ok {
		delete(b.fences, name)
		b.move.unfence[name] = true // it had moved away from here before
	}
	return Outcome{Value: logEnd(want)}
}

// moveContents records, in the install's batch, the content the moved
// session's records name as held by the install's holders (the source
// group's voters), so that every node of the destination fetches,
// verifies and receipts its copy as for a write naming bytes, and a read
// there fetches from them. The records are read from the installed log,
// the same on every replica.
func (m *dataSM) moveContents(c Command, d MoveDoc) error {
	b := m.batch
	if b == nil || len(d.Holders) == 0 {
		return nil
	}
	// Folding the log costs as much as opening the session: a log that
	// never names an artifact's record type has no content to record, and
	// its install is not made to wait for the fold.
	dir, err := store.SessionDir(m.cfg.Root, c.Tenant, c.Session)
	if err != nil {
		return err
	}
	if named, err := m.namesArtifacts(c.Tenant, c.Session, store.LogPath(dir)); err != nil || !named {
		return err
	}
	l, err := m.Open(context.Background(), c.Tenant, c.Session, false)
	if err != nil {
		return err
	}
	var rows []claim.StoredArtifact
	l.Read(func(st *ledger.State) {
		rows, err = ledgerservice.ArtifactRows(st, "", time.Unix(0, m.now.Load()).UTC())
	})
	if err != nil {
		return err
	}
	for _, r := range rows {
		if _, perr := digest.ParseContentDigest(r.Content); perr != nil {
			continue
		}
		if err := b.addContent(m, r.Content, r.Size, d.Holders, d.Move); err != nil {
			return err
		}
	}
	return nil
}

// fileMentions reports whether the file at path holds needle.
func fileMentions(path string, needle []byte) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return readerMentions(f, needle)
}

// addContent adds holders of content to the batch's record of it, for
// move's install: a record it makes is the move's (contentRecord.MovedIn).
func (b *batchUploads) addContent(m *dataSM, content string, size int64, holders []uint64, move uint64) error {
	rec, ok := b.contents[content]
	if !ok {
		found, err := m.get(contentKey(b.group, content), &rec)
		if err != nil {
			return err
		}
		ok = found
	}
	if !ok || rec.gone {
		rec = contentRecord{MovedIn: move}
	}
	rec.Size = size
	for _, h := range holders {
		if !slices.Contains(rec.Holders, h) {
			rec.Holders = append(rec.Holders, h)
		}
	}
	slices.Sort(rec.Holders)
	b.contents[content] = rec
	return nil
}

// end is the fenced end an install names.
func (d MoveDoc) end() (store.Position, error) {
	var p store.Position
	h, err := hex.DecodeString(d.Chain)
	if err != nil || len(h) != len(p.Hash) || d.Seq == 0 || d.Length <= 0 {
		return p, refuse.Invalidf("chain", fmt.Sprintf("an install names the fenced end: a sequence, a %d-byte chain hash in hex and a length (got %d, %q, %d)", len(p.Hash), d.Seq, d.Chain, d.Length))
	}
	copy(p.Hash[:], h)
	p.Seq, p.Offset = d.Seq, d.Length
	return p, nil
}

// completeShared checks that the log this node's source replica wrote
// ends at want; one still short of it (the source group applied less
// here than the install's proposer saw) is completed from another source
// replica, and the source's commands it then applies late are refused
// (moveEntry), their lines being in the log already.
func (m *dataSM) completeShared(tenant, session string, from uint64, want store.Position) error {
	pos, err := m.tailPosition(tenant, session)
	if err != nil {
		return err
	}
	if pos.Offset < want.Offset {
		name := tenant + "/" + session
		m.mu.Lock()
		err := m.closeSession(name)
		m.mu.Unlock()
		if err != nil {
			return err
		}
		dir, err := store.SessionDir(m.cfg.Root, tenant, session)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
		defer cancel()
		if pos, err = m.stageFile(ctx, store.LogPath(dir), tenant, session, from, want.Offset); err != nil {
			return err
		}
	}
	if pos != want {
		return fmt.Errorf("replica: install %s/%s: this node's log ends at sequence %d, %d bytes, not the fenced sequence %d, %d bytes, chain %x", tenant, session, pos.Seq, pos.Offset, want.Seq, want.Offset, want.Hash)
	}
	return nil
}

// installStaged puts the copy this node staged (completed to want if
// short) in place as the session's log.
func (m *dataSM) installStaged(tenant, session string, from uint64, want store.Position) error {
	staged := m.stagedPath(tenant, session)
	ctx, cancel := context.WithTimeout(context.Background(), FetchTimeout)
	defer cancel()
	pos, err := m.stageFile(ctx, staged, tenant, session, from, want.Offset)
	if err != nil {
		return err
	}
	if pos != want {
		return fmt.Errorf("replica: install %s/%s: the copy ends at sequence %d, %d bytes, not the fenced sequence %d, %d bytes, chain %x", tenant, session, pos.Seq, pos.Offset, want.Seq, want.Offset, want.Hash)
	}
	if err := m.removeSession(tenant, session); err != nil {
		return err
	}
	dir, err := store.SessionDir(m.cfg.Root, tenant, session)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	m.forgetStaged(staged)
	if err := os.Rename(staged, store.LogPath(dir)); err != nil {
		return err
	}
	for d, i := dir, 0; i < 3; d, i = filepath.Dir(d), i+1 {
		if err := store.SyncDir(d); err != nil {
			return err
		}
	}
	return nil
}
