package store

import "time"

// syncLoop makes written batches durable, one fsync for all that are
// waiting, and acknowledges them in order, until none wait. The caller has
// set p.syncing; syncLoop clears it.
func (p *Pipeline) syncLoop(inline bool) {
	acked := 0 // requests the last fsync covered: their writers may be back soon
	var took time.Duration
	for {
		if acked > 1 && p.cfg.CohortWait > 0 && !inline {
			// Let the writers just acknowledged come back and share the
			// next fsync with those waiting, rather than split the writers
			// into cohorts that take turns. (Inline, the syncer is a writer
			// that cannot come back before it returns.)
			p.dmu.Lock()
			waiting := p.unwrittenReqs
			p.dmu.Unlock()
			p.awaitCohort(waiting+acked, min(p.cfg.CohortWait, 2*took))
		}
		acked = 0
		p.dmu.Lock()
		if len(p.unsynced) == 0 && len(p.unwritten) > 0 {
			if p.syncErr == nil {
				p.dmu.Unlock()
				p.writeUnwritten()
				continue
			}
			// After a failed fsync nothing more is written: they fail too.
			p.failedWs = append(p.failedWs, p.unwritten...)
			p.unwritten, p.unwrittenReqs = nil, 0
		}
		ws := p.unsynced
		p.unsynced = nil
		if len(ws) == 0 {
			p.syncing = false
			p.dmu.Unlock()
			p.wakeReaders()
			signal(p.synced)
			signal(p.wake)
			return
		}
		err := p.syncErr
		need := ws[len(ws)-1].to.Offset > p.durable.Offset
		p.dmu.Unlock()
		started := time.Now()
		if err == nil && need {
			err = p.log.Sync()
		}
		elapsed := time.Since(started)
		requests, records, appended := 0, 0, 0
		for _, w := range ws {
			requests += len(w.batch)
			records += w.records
			appended += w.appended
		}
		p.dmu.Lock()
		if err != nil {
			// Their writers hear of it once the committer has cut the
			// lines back out of the file, so a failed write leaves nothing.
			if p.syncErr == nil {
				p.syncErr, p.failFrom = err, ws[0].from
			}
			p.failedWs = append(p.failedWs, ws...)
			p.dmu.Unlock()
			continue
		}
		p.setDurable(ws[len(ws)-1].to)
		if need {
			p.stats.Commits++
		}
		p.stats.Appended += uint64(appended)
		durable := p.durable.Seq
		more := len(p.unwritten) > 0 || len(p.unsynced) > 0
		p.dmu.Unlock()
		acked, took = requests, elapsed
		if more {
			// The next batches are waiting for their fsync: start it first
			// and wake these writers meanwhile, on the other core.
			p.loops.Add(1)
			go func() {
				defer p.loops.Done()
				acknowledge(ws)
			}()
		} else {
			acknowledge(ws)
		}
		if records > 0 && p.cfg.Observe != nil {
			p.cfg.Observe(CommitInfo{Requests: requests, Records: records, Fsync: elapsed})
		}
		p.wakeReaders()
		if p.checkpointWantedAt(durable, runShare) {
			p.startCheckpoint()
		}
	}
}

// wakeReaders wakes the readers waiting for durability, which the syncer
// has just moved under dmu. Readers count themselves in waiting before they
// look at it (see waitDurableLocked), so with none counted nobody can be
// between the look and the Wait, and the syncer skips mu; otherwise it
// broadcasts under mu, which a reader holds from its look until Wait.
func (p *Pipeline) wakeReaders() {
	if p.waiting.Load() == 0 {
		return
	}
	p.mu.Lock()
	p.reads.Broadcast()
	p.mu.Unlock()
}

// awaitCohort waits, at most bound, until target requests are decided and
// waiting to be written.
func (p *Pipeline) awaitCohort(target int, bound time.Duration) {
	if bound <= 0 || p.waiting.Load() > 0 {
		return // readers wait for the disk, and the committer for them
	}
	p.dmu.Lock()
	if p.unwrittenReqs >= target {
		p.dmu.Unlock()
		return
	}
	p.cohortTarget = target
	p.dmu.Unlock()
	timer := time.NewTimer(bound)
	select {
	case <-p.decided:
	case <-timer.C:
	}
	timer.Stop()
	p.dmu.Lock()
	p.cohortTarget = 0
	p.dmu.Unlock()
	select { // a signal that came after the timer: drop it
	case <-p.decided:
	default:
	}
}

// acknowledge tells the writers of durable batches that they are.
func acknowledge(ws []*written) {
	for _, w := range ws {
		for _, r := range w.batch {
			r.Settle(nil, true)
		}
	}
}

// signal leaves a token in c (capacity 1) unless one waits there already.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
