package store

import "errors"

// load rebuilds the state from the checkpoint (if it matches) and the tail.
// Called with mu held.
func (p *Pipeline) load() error {
	p.m.Reset()
	p.pos, p.stale = Position{}, false
	p.cpSeq.Store(0)
	if pos, payload, verify, err := p.log.ReadCheckpointAsync(); err == nil {
		// Decode while the checksum is computed; trust neither until both hold.
		derr := p.m.Restore(payload)
		switch verr := verify(); {
		case verr != nil:
			p.m.Reset()
			p.logger.Warn("ignoring a damaged checkpoint; folding the log", "err", verr)
		case derr != nil:
			p.m.Reset()
			p.logger.Warn("ignoring a checkpoint that does not decode; folding the log", "err", derr)
		default:
			p.pos = pos
			p.cpSeq.Store(pos.Seq)
		}
	} else if !errors.Is(err, ErrNoCheckpoint) {
		return err
	}
	if err := p.refreshLocked(); err != nil {
		return err
	}
	p.dmu.Lock()
	p.setDurable(p.pos)
	p.dmu.Unlock()
	p.maybeCheckpointLocked()
	return nil
}

// Refresh folds lines other processes appended since the last look. It
// takes no file lock: readers never block writers.
func (p *Pipeline) Refresh() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale {
		return p.load()
	}
	return p.refreshLocked()
}

func (p *Pipeline) refreshLocked() error {
	before := p.pos.Seq
	pos, _, err := p.log.Scan(p.pos, p.m.Apply)
	p.pos = pos
	if pos.Seq != before {
		// Lines from another process. Our own lines before them are all
		// durable: the committer holds the file lock until they are.
		p.dmu.Lock()
		p.setDurable(pos)
		p.dmu.Unlock()
	}
	return err
}

// catchUpLocked folds what other processes appended before this tx took the
// lock (rebuilding first if a failed commit left the state stale). Called
// with mu held, by the committer, right after Begin.
func (p *Pipeline) catchUpLocked() error {
	if p.stale {
		if err := p.load(); err != nil {
			return err
		}
	}
	before := p.pos.Seq
	pos, err := p.tx.CatchUp(p.pos, p.m.Apply)
	p.pos = pos
	if err != nil {
		return err
	}
	if pos.Seq != before {
		p.dmu.Lock()
		p.setDurable(pos)
		p.dmu.Unlock()
	}
	return nil
}
