package transport

import (
	"context"
	"sync"
	"time"

	"tally/internal/tick"
)

// pacer holds the snapshot bodies a node sends, over all its streams, to
// a byte rate: each chunk waits its turn, a chunk's worth of burst at
// most, so re-replication leaves the disk and the network to the
// groups' writes. A zero rate does not pace.
type pacer struct {
	rate float64 // bytes a second

	mu   sync.Mutex
	next time.Time // when the next chunk may go
}

func newPacer(bytesPerSecond int64) *pacer { return &pacer{rate: float64(bytesPerSecond)} }

// wait returns when n more bytes may be sent, or with ctx's error.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p == nil || p.rate <= 0 {
		return nil
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now) {
		p.next = now
	}
	at := p.next
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	p.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return nil
	}
	return tick.Sleep(ctx, d)
}
