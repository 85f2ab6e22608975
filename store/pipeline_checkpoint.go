package store

// Checkpoint thresholds as a share of the lines the last checkpoint covered
// (see CommitConfig.CheckpointMin).
const (
	openShare = 8 // at open and close
	runShare  = 2 // while a process writes
)

// checkpointWantedAt reports whether the log at seq has grown enough since
// the last checkpoint: at least CheckpointMin lines and 1/share of the lines
// that checkpoint covered.
func (p *Pipeline) checkpointWantedAt(seq, share uint64) bool {
	cp := p.cpSeq.Load()
	since := seq - cp
	return since >= p.cfg.CheckpointMin && since >= cp/share
}

// writeSnapshotLocked writes a checkpoint of the state as it is, under the
// lock.
func (p *Pipeline) writeSnapshotLocked() error {
	snap := p.m.Snapshot(false)
	defer snap.Release()
	_, err := p.log.WriteCheckpointFrom(p.pos, snap.Encode)
	return err
}

// maybeCheckpointLocked writes a checkpoint, under the lock, if the log has
// grown by the open rule since the last: at open and close, when nothing
// else writes.
func (p *Pipeline) maybeCheckpointLocked() {
	if !p.checkpointWantedAt(p.pos.Seq, openShare) {
		return
	}
	p.cpSeq.Store(p.pos.Seq)
	if err := p.writeSnapshotLocked(); err != nil {
		p.logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
	}
}

// Checkpoint writes a checkpoint at the current position now.
func (p *Pipeline) Checkpoint() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	if err := p.writeSnapshotLocked(); err != nil {
		return err
	}
	p.cpSeq.Store(p.pos.Seq)
	return nil
}

// startCheckpoint encodes and writes a checkpoint in the background. The
// encoding waits, like a reader, until the state holds nothing that is not
// durable; at most one runs at a time.
func (p *Pipeline) startCheckpoint() {
	p.dmu.Lock()
	if p.cpBusy {
		p.dmu.Unlock()
		return
	}
	p.cpBusy = true
	p.dmu.Unlock()
	p.cpWriters.Add(1)
	go func() {
		defer p.cpWriters.Done()
		defer func() {
			p.dmu.Lock()
			p.cpBusy = false
			p.dmu.Unlock()
		}()
		p.cpWrite.Lock()
		defer p.cpWrite.Unlock()
		// The state is frozen under the lock, then encoded and written
		// without it, so writers go on meanwhile: encoding takes about a
		// microsecond a promise, a second at a million.
		p.mu.Lock()
		p.waitDurableLocked()
		if p.stale || !p.checkpointWantedAt(p.pos.Seq, runShare) {
			p.mu.Unlock()
			return
		}
		p.cpSeq.Store(p.pos.Seq) // claimed: nobody encodes it twice
		pos, snap := p.pos, p.m.Snapshot(true)
		p.mu.Unlock()
		_, err := p.log.WriteCheckpointFrom(pos, snap.Encode)
		p.mu.Lock()
		snap.Release()
		p.mu.Unlock()
		if err != nil {
			p.logger.Warn("could not write a checkpoint; the next open folds more of the log", "err", err)
		}
	}()
}
