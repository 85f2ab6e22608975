package store

// failed reports whether an fsync failed and the log awaits being cut back.
func (p *Pipeline) failed() bool {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return p.syncErr != nil
}

// idle reports whether nothing written awaits an fsync.
func (p *Pipeline) idle() bool {
	p.dmu.Lock()
	defer p.dmu.Unlock()
	return !p.syncing && len(p.unsynced) == 0 && len(p.unwritten) == 0
}

// drain waits until everything written is durable (or failed).
func (p *Pipeline) drain() {
	for !p.idle() {
		<-p.synced
	}
}

// drainAndRelease waits until everything written is durable and releases
// the file lock; if an fsync failed meanwhile, it first cuts the log back.
func (p *Pipeline) drainAndRelease() {
	p.drain()
	p.mu.Lock()
	p.flushHeldLocked() // lines held for a holder that has stopped holding
	p.mu.Unlock()
	if p.failed() {
		p.recoverFromSyncFailure()
		return
	}
	p.releaseTx()
}

// recoverFromSyncFailure cuts the log back to before the first batch whose
// fsync failed (every batch after it failed too), so nothing
// unacknowledged stays in the file, and leaves the state to be rebuilt.
func (p *Pipeline) recoverFromSyncFailure() {
	p.drain()
	p.dmu.Lock()
	from := p.failFrom
	p.dmu.Unlock()
	if p.tx != nil {
		if err := p.tx.Cut(from); err != nil {
			p.logger.Error("store: could not cut unacknowledged lines after a failed fsync", "err", err)
		}
	}
	p.releaseTx()
	p.mu.Lock()
	p.stale = true
	p.rebuildLocked()
	p.dmu.Lock()
	err, ws := p.syncErr, p.failedWs
	p.dropHeldLocked(err) // cut with the buffer
	p.syncErr, p.failedWs = nil, nil
	p.dmu.Unlock()
	p.mu.Unlock()
	p.reads.Broadcast()
	for _, w := range ws {
		fail(w.batch, err)
	}
}

// rebuildLocked refolds the state from the log after a failed write, so
// readers do not see records that are not in it. Called with mu held, the
// tx released and nothing awaiting fsync; if it fails, the state stays
// stale and the next write or Refresh tries again.
func (p *Pipeline) rebuildLocked() {
	if err := p.load(); err != nil {
		p.stale = true
		p.logger.Error("store: could not refold the log after a failed write", "err", err)
	}
}

// releaseTx releases the file lock if the committer holds it.
func (p *Pipeline) releaseTx() {
	if p.tx != nil {
		p.tx.Release()
		p.tx = nil
	}
}
