package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrQueueFull is wrapped by Submit's error when the commit queue stayed
// full until the writer's context ended.
var ErrQueueFull = errors.New("commit queue full")

// Submit queues r and either returns at once, the committer carrying it
// from there, or becomes the committer: the first writer to find no commit
// in progress commits its own batch inline (a lone writer pays no goroutine
// hand-off), then leaves whatever queued meanwhile to a commit loop of its
// own, so concurrent writers share one lock and few fsyncs. Either way r is
// settled exactly once, after Submit returns or before; the caller waits
// for that. A full queue (QueueMax) makes Submit wait for room until ctx
// ends; it then returns an error wrapping ErrQueueFull and ctx's, and r is
// never settled nor decided.
func (p *Pipeline) Submit(ctx context.Context, r Request) error {
	p.qmu.Lock()
	for len(p.queue) >= p.cfg.QueueMax {
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.qmu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return fmt.Errorf("%w (%d waiting): %w", ErrQueueFull, p.cfg.QueueMax, ctx.Err())
		}
		p.qmu.Lock()
	}
	p.queue = append(p.queue, r)
	if p.committing {
		p.qmu.Unlock()
		signal(p.wake) // the committer may be waiting for work
		return nil
	}
	p.committing = true
	p.loops.Add(1)
	p.qmu.Unlock()
	p.commitLoopN(1)
	return nil
}

// holdMax bounds how long the committer keeps the file lock through a
// stream of batches while a writer in another process waits for it: then it
// lets the pipeline drain, releases it and gives way.
const holdMax = 20 * time.Millisecond

// giveWay waits, after the committer released the file lock for a waiting
// writer, until that writer has it (it stops saying it waits), at most
// 20 ms: an flock goes to whoever asks first, and the committer would
// otherwise take it straight back.
func (p *Pipeline) giveWay() {
	for deadline := time.Now().Add(20 * time.Millisecond); time.Now().Before(deadline) && p.log.Contended(); {
		time.Sleep(100 * time.Microsecond)
	}
}

// commitLoop commits queued requests until the queue is empty.
func (p *Pipeline) commitLoop() { p.commitLoopN(0) }

// commitLoopN commits queued requests in batches until the queue is empty
// and everything written is durable or, with inline > 0, after that many
// batches, handing what is still queued to a commit loop in its own
// goroutine. p.committing is true on entry and owned by the loop; p.loops
// counts it.
func (p *Pipeline) commitLoopN(inline int) {
	defer p.loops.Done()
	var inflight []Request
	defer func() {
		// A panic in a commit is a broken invariant. It must neither wedge
		// later writers nor take the process down: fail the batch, rebuild
		// the state from the log before the next write, and say so loudly.
		if v := recover(); v != nil {
			p.logger.Error("store: internal error in a commit; the batch failed and the state will be rebuilt from the log", "panic", fmt.Sprint(v))
			for _, r := range inflight {
				if !r.Settled() {
					r.Settle(fmt.Errorf("store: internal error: %v", v), false)
				}
			}
			p.drainAndRelease() // earlier batches are written: make them durable (or fail them)
			p.mu.Lock()
			p.stale = true
			p.rebuildLocked()
			p.mu.Unlock()
			p.qmu.Lock()
			p.committing = false
			restart := len(p.queue) > 0
			if restart {
				p.committing = true
				p.loops.Add(1)
			}
			p.qmu.Unlock()
			if restart {
				go p.commitLoop()
			}
		}
	}()
	for done := 0; ; done++ {
		if p.failed() {
			p.recoverFromSyncFailure()
		}
		p.qmu.Lock()
		n := min(len(p.queue), p.cfg.BatchMax)
		if n == 0 {
			p.qmu.Unlock()
			if p.idle() {
				p.qmu.Lock()
				if len(p.queue) == 0 && p.holding.Load() {
					// Holding: the tx and its held lines wait for the
					// next write, or for Unhold.
					p.committing = false
					p.qmu.Unlock()
					return
				}
				p.qmu.Unlock()
				// Everything written is durable: let other processes in.
				p.drainAndRelease()
				p.qmu.Lock()
				if len(p.queue) == 0 {
					p.committing = false
					p.qmu.Unlock()
					return
				}
				p.qmu.Unlock()
				continue
			}
			select { // a request queued, or the syncer stopped
			case <-p.wake:
			case <-p.synced:
			}
			continue
		}
		if inline > 0 && done == inline {
			p.loops.Add(1) // still committing: the loop carries on elsewhere
			p.qmu.Unlock()
			go p.commitLoop()
			return
		}
		batch := make([]Request, n)
		copy(batch, p.queue)
		p.queue = p.queue[n:]
		if p.room != nil {
			close(p.room) // writers waiting for room: there is
			p.room = nil
		}
		p.qmu.Unlock()
		if p.tx != nil && time.Since(p.txHeld) > holdMax {
			if p.log.Contended() {
				p.drainAndRelease()
				p.giveWay()
			} else {
				p.txHeld = time.Now()
			}
		}
		inflight = batch
		p.commit(context.Background(), batch, inline > 0)
		inflight = nil
	}
}

// fail settles every request of batch with err (a request Decide refused
// keeps its refusal).
func fail(batch []Request, err error) {
	for _, r := range batch {
		r.Settle(err, true)
	}
}

// commit carries one batch through lock, catch-up, decide and write, then
// hands it to be made durable: inline, by a writer committing its own batch
// when nothing else waits (a lone writer pays no hand-off), else by the
// syncer goroutine, while the committer decides the next batch.
func (p *Pipeline) commit(ctx context.Context, batch []Request, own bool) {
	if p.tx == nil {
		lockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.LockTimeout)
		tx, err := p.log.Begin(lockCtx)
		cancel()
		if err != nil {
			fail(batch, err)
			return
		}
		p.tx, p.txHeld = tx, time.Now()
		p.mu.Lock()
		err = p.catchUpLocked()
		p.mu.Unlock()
		if err != nil {
			p.releaseTx()
			fail(batch, err)
			return
		}
	}
	start, err := p.decideAndWrite(batch)
	if err != nil {
		// Nothing of this batch is in the file; the state folded it.
		p.drainAndRelease()
		p.mu.Lock()
		p.rebuildLocked()
		p.mu.Unlock()
		fail(batch, err)
		return
	}
	if !start {
		return // the running syncer writes it and takes it with its next fsync
	}
	p.qmu.Lock()
	more := len(p.queue) > 0
	p.qmu.Unlock()
	if more || !own {
		p.loops.Add(1)
		go func() {
			defer p.loops.Done()
			p.syncLoop(false)
		}()
		return
	}
	p.syncLoop(true)
}
