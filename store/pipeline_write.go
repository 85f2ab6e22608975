package store

// decideAndWrite has the machine decide the batch against the state, and
// hands it on: written at once when no fsync runs (start reports that the
// caller must start the syncer), else left in the tx's buffer for the
// syncer to write when its fsync ends. A write while an fsync runs makes
// that fsync several times slower on common file systems, so lines are
// written only between fsyncs. On a write error the state is marked stale.
// A panic leaves mu unlocked.
func (p *Pipeline) decideAndWrite(batch []Request) (start bool, err error) {
	tx := p.tx
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.readers > 0 {
		p.reads.Wait() // readers wait for the disk; let them read first
	}
	from := p.pos
	defer func() {
		if v := recover(); v != nil {
			tx.Rewind(from) // nothing of a failed batch may reach the file
			panic(v)
		}
	}()
	appended, refused := p.m.Decide(tx, batch)
	to := tx.Pending()
	w := &written{batch: batch, from: from, to: to, records: int(to.Seq - from.Seq), appended: appended}
	p.dmu.Lock()
	p.stats.Refused += uint64(refused)
	if p.holding.Load() {
		p.dmu.Unlock()
		p.pos = to
		p.holdDecided(w)
		return false, nil
	}
	if p.syncing {
		p.unwritten = append(p.unwritten, w)
		p.unwrittenReqs += len(batch)
		full := p.cohortTarget > 0 && p.unwrittenReqs >= p.cohortTarget
		p.dmu.Unlock()
		if full {
			signal(p.decided) // the syncer's cohort is complete
		}
		p.pos = to
		return false, nil
	}
	p.dmu.Unlock()
	if _, err := tx.Write(); err != nil {
		p.stale = true
		return false, err
	}
	p.pos = to
	p.dmu.Lock()
	p.unsynced = append(p.unsynced, w)
	p.syncing = true
	p.dmu.Unlock()
	return true, nil
}

// writeUnwritten writes the batches decided while the last fsync ran, all
// at once, for the next fsync. Called by the syncer.
func (p *Pipeline) writeUnwritten() {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := p.tx.Write()
	p.dmu.Lock()
	defer p.dmu.Unlock()
	ws := p.unwritten
	p.unwritten, p.unwrittenReqs = nil, 0
	if err != nil {
		p.stale = true
		if p.syncErr == nil {
			p.syncErr, p.failFrom = err, ws[0].from
		}
		p.failedWs = append(p.failedWs, ws...)
		return
	}
	p.unsynced = append(p.unsynced, ws...)
}
