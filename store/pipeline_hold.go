package store

import "errors"

// Holding: a writer that makes its writes durable itself, and writes alone,
// can have the pipeline keep the file lock and the decided lines from one
// write to the next, and write them all with one system call at the end. A
// cluster replica applying a raft batch is that writer: its raft log, not
// the session log, holds the commands until it syncs the session, and it
// applies its group's commands one after another on one goroutine. Without
// holding, each of its commands is a group commit of its own: the lock, the
// catch-up's fstat, a write and the unlock, for every command.

// Hold starts holding: from the next write on, the committer keeps the
// file lock once it has it, and each write is settled as soon as it is
// decided and folded, its lines kept in the tx's buffer, written at Unhold
// or as soon as a reader needs them (a read never sees a line the file
// does not hold). Settled here means decided, not written: the holder must
// call Unhold before it treats any of its writes as done, and treat
// Unhold's error as the failure of all of them.
//
// The holder must be the pipeline's only writer from Hold to Unhold (other
// goroutines may read), with no write under way when it calls either.
func (p *Pipeline) Hold() { p.holding.Store(true) }

// Unhold stops holding: it writes the lines decided since Hold and releases
// the file lock. It returns the first error writing them met: then none of
// them is in the file and the state was rebuilt from the log.
func (p *Pipeline) Unhold() error {
	p.holding.Store(false)
	p.mu.Lock()
	p.flushHeldLocked()
	err, info := p.holdErr, p.heldInfo
	p.holdErr, p.heldInfo = nil, CommitInfo{}
	durable := p.pos.Seq
	p.mu.Unlock()
	if info.Records > 0 && p.cfg.Observe != nil {
		p.cfg.Observe(info)
	}
	p.qmu.Lock()
	idle := !p.committing
	if idle {
		p.committing = true // the tx is the committer's: take its place to release it
		p.loops.Add(1)
	}
	p.qmu.Unlock()
	if !idle {
		return err // another writer's committer releases the lock once idle
	}
	p.drainAndRelease()
	p.qmu.Lock()
	restart := len(p.queue) > 0
	p.committing = restart
	p.qmu.Unlock()
	if restart {
		go p.commitLoop() // takes over the loops count
	} else {
		p.loops.Done()
	}
	if err == nil && p.checkpointWantedAt(durable, runShare) {
		p.startCheckpoint()
	}
	return err
}

// holdDecided takes a batch decided while holding: its lines stay in the
// tx's buffer, the state has folded them, and its requests are settled.
// Called with mu held.
func (p *Pipeline) holdDecided(w *written) {
	p.held = append(p.held, w)
	for _, r := range w.batch {
		r.Settle(nil, true)
	}
}

// flushHeldLocked writes the lines of the batches decided while holding and
// makes them the durable end (their holder syncs them). If the write fails
// none of them stays in the file (Tx.Write cuts it back), the state is
// rebuilt from the log, and the error is kept for Unhold. Called with mu
// held.
func (p *Pipeline) flushHeldLocked() {
	if len(p.held) == 0 {
		return
	}
	ws := p.held
	p.held = nil
	err := errHeldWithoutTx
	if p.tx != nil {
		_, err = p.tx.Write()
	}
	if err != nil {
		p.stale = true
		p.rebuildLocked()
		if p.holdErr == nil {
			p.holdErr = err
		}
		return
	}
	appended := 0
	for _, w := range ws {
		p.heldInfo.Requests += len(w.batch)
		p.heldInfo.Records += w.records
		appended += w.appended
	}
	p.dmu.Lock()
	p.setDurable(ws[len(ws)-1].to)
	p.stats.Appended += uint64(appended)
	p.dmu.Unlock()
}

// dropHeldLocked forgets the held lines a failure took out of the tx's
// buffer before they were written, keeping err for Unhold. Called with mu
// held.
func (p *Pipeline) dropHeldLocked(err error) {
	if len(p.held) == 0 {
		return
	}
	p.held = nil
	if p.holdErr == nil {
		p.holdErr = err
	}
}

// errHeldWithoutTx is a broken invariant: lines decided while holding and
// no tx to write them.
var errHeldWithoutTx = errors.New("store: lines decided while holding, and no transaction to write them")
