package ledger

import (
	"tally/store"
)

// machine is the ledger's folded state as the group commit sees it
// (store.Machine): the pipeline calls it under its lock to fold lines, to
// decide batches and to capture checkpoints.
type machine struct{ l *Ledger }

var (
	_ store.Machine    = machine{}
	_ store.Snapshot   = snapshot{}
	_ store.Request    = (*request)(nil)
	_ store.SessionLog = hookedLog{}
)

// Reset empties the state.
func (m machine) Reset() { m.l.st = newState(m.l.cfg) }

// Restore replaces the state with a checkpoint's; on error it is left as
// it was (the pipeline resets it).
func (m machine) Restore(payload []byte) error {
	st, err := readSnapshot(m.l.cfg, payload, m.l.log)
	if err != nil {
		return err
	}
	m.l.st = st
	return nil
}

// Apply folds one verified line.
func (m machine) Apply(e store.Entry) error { return m.l.st.apply(e) }

// Decide decides each request of the batch against the state, and appends
// and folds what it decides (appendLocked).
func (m machine) Decide(tx store.Appender, batch []store.Request) (appended, refused int) {
	l := m.l
	now := l.cfg.Now()
	for _, q := range batch {
		r := q.(*request)
		if l.checkIdempotency(r, now) {
			continue
		}
		recs, warn, err := l.decideIn(r, now)
		if err != nil {
			r.err = err
			refused++
			continue
		}
		if len(recs) == 0 {
			continue // nothing to do (a sweep with nothing due)
		}
		l.appendLocked(tx, r, recs, warn, now)
	}
	for _, q := range batch {
		appended += len(q.(*request).res)
	}
	return appended, refused
}

// snapshotChunk is how much of a checkpoint is encoded before it is
// written: the state is never encoded whole in memory (a hundred megabytes
// at a million promises, page-faulted in and collected each time).
const snapshotChunk = 256 << 10

// Snapshot captures the state for a checkpoint: head, then the promise
// state, frozen (copy on write) when it is encoded without the lock.
func (m machine) Snapshot(frozen bool) store.Snapshot {
	st := m.l.st
	s := snapshot{head: st.snapshotHead(), stream: st.Promises.StreamSnapshot}
	if frozen {
		fr := st.Promises.Freeze()
		s.stream, s.release = fr.StreamSnapshot, fr.Release
	}
	return s
}

// snapshot is a checkpoint's head and the promise state's encoder
// (State.StreamSnapshot or Frozen.StreamSnapshot).
type snapshot struct {
	head    snapshotHead
	stream  func([]byte, int, func([]byte) error) error
	release func()
}

func (s snapshot) Encode(emit func([]byte) error) error {
	return s.stream(s.head.append(make([]byte, 0, snapshotChunk+snapshotChunk/4)), snapshotChunk, emit)
}

func (s snapshot) Release() {
	if s.release != nil {
		s.release()
	}
}
