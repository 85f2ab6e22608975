package store

// Read calls fn, with the lock held, once the state holds everything
// durable and nothing that is not, with the position it has folded. fn may
// read the machine's state; it must not keep references past its return,
// modify the state, or call the pipeline.
func (p *Pipeline) Read(fn func(pos Position)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	fn(p.pos)
}

// Position is the end of what has been folded and is durable.
func (p *Pipeline) Position() Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.waitDurableLocked()
	return p.pos
}

// waitDurableLocked waits, with mu held, until every line the state has
// folded is durable, so a reader never sees a record before its writer is
// acknowledged. The committer does not decide while readers wait, so the
// wait is at most one fsync. After a failed fsync it waits for the
// committer to cut the log back; the state is then stale and rebuilt by the
// next Refresh or write.
//
// The syncer moves durability under dmu, not mu, so a reader counts itself
// in waiting before it looks: a syncer that moves durability after the look
// then sees the count and broadcasts under mu (wakeReaders), which it cannot
// take until this reader is inside Wait. Without that, an fsync ending
// between the look and the Wait was never heard, and the reader waited, and
// the committer for the reader, for ever.
func (p *Pipeline) waitDurableLocked() {
	p.flushHeldLocked() // a holder's lines: written now, for the read
	for {
		p.waiting.Add(1)
		p.dmu.Lock()
		done := p.durable.Seq >= p.pos.Seq && p.syncErr == nil
		p.dmu.Unlock()
		if done {
			p.waiting.Add(-1)
			break
		}
		p.readers++
		signal(p.decided) // a syncer waiting for a cohort: write what there is
		p.reads.Wait()
		p.waiting.Add(-1)
		p.readers--
	}
	if p.readers == 0 {
		p.reads.Broadcast() // a committer may be waiting for readers to finish
	}
}
