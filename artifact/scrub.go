package artifact

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// ScrubStats counts what scrubbing found, for /metrics.
type ScrubStats struct {
	Bytes   atomic.Int64 // bytes re-read
	Objects atomic.Int64 // objects re-read
	Damaged atomic.Int64 // damaged or missing copies found
	Passes  atomic.Int64 // whole passes over the store
}

// Scrubber re-reads every stored object at a bounded rate, so that rot is
// found before a reader needs the bytes. A damaged copy is never served
// whether or not it was found (every read verifies); finding it reports it
// (Found, the log, the stats), so that it is repaired or restored.
type Scrubber struct {
	Store *Store
	// Rate bounds the bytes read a second (a pass over 1 GiB at 16 MiB/s
	// takes a minute), leaving the disk to the writes.
	Rate int64
	// Every is the wait from a pass's start to the next's (at least the
	// pass itself).
	Every  time.Duration
	Logger *slog.Logger
	// Found, if set, is told of each damaged or missing copy.
	Found func(Checked)
	Stats *ScrubStats
}

// Pass re-reads every object once and returns those not ok.
func (sc *Scrubber) Pass(ctx context.Context) ([]Checked, error) {
	if sc.Stats == nil {
		sc.Stats = &ScrubStats{}
	}
	objs, err := sc.Store.Objects()
	if err != nil {
		return nil, err
	}
	var bad []Checked
	for _, o := range objs {
		c, err := sc.Store.Check(ctx, o, sc.Rate)
		if err != nil {
			return bad, err
		}
		sc.Stats.Objects.Add(1)
		sc.Stats.Bytes.Add(o.Size)
		if c.State == StateOK {
			continue
		}
		sc.Stats.Damaged.Add(1)
		sc.Logger.Warn("scrub: a stored copy is "+c.State, "content", o.Content.String(), "size", o.Size, "err", c.Err)
		if sc.Found != nil {
			sc.Found(c)
		}
		bad = append(bad, c)
	}
	sc.Stats.Passes.Add(1)
	return bad, nil
}

// Run scrubs until ctx ends: a pass, then the rest of Every.
func (sc *Scrubber) Run(ctx context.Context) {
	for {
		start := time.Now()
		if _, err := sc.Pass(ctx); err != nil && ctx.Err() == nil {
			sc.Logger.Error("scrub: a pass stopped", "err", err)
		}
		t := time.NewTimer(max(time.Until(start.Add(sc.Every)), time.Second))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
