package node

import (
	"context"
	"time"
)

// Run drives the node from the calling goroutine until ctx ends: a tick
// every TickInterval, each batch from inbox stepped in, each call run on
// the node (the way other goroutines Propose or ReadIndex: their callbacks
// run here too), and the loop processed until it is idle. What is waiting
// is taken in together (up to runDrain events) before the loop processes
// it, so concurrent proposals share one Ready, one synced batch and one
// apply.
func (n *MultiRaft) Run(ctx context.Context, inbox <-chan []Envelope, calls <-chan func(*MultiRaft)) error {
	t := time.NewTicker(n.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			n.Tick()
		case batch := <-inbox:
			n.deliverAll(batch)
		case call := <-calls:
			call(n)
		case <-n.reports.wake:
			// Process hands the snapshot streams' outcomes to raft.
		}
	drain:
		for i := 0; i < runDrain; i++ {
			select {
			case batch := <-inbox:
				n.deliverAll(batch)
			case call := <-calls:
				call(n)
			default:
				break drain
			}
		}
		for n.Process() {
		}
	}
}

// runDrain bounds the events Run takes in before it processes them.
const runDrain = 1024

func (n *MultiRaft) deliverAll(batch []Envelope) {
	for _, e := range batch {
		n.Deliver(e)
	}
}
