package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"tally/api"
	"tally/service"
)

// BenchmarkClusterWrites runs three nodes in this process and 64 writers
// declaring promises in one session through every node: the writes a
// second, and (with -cpuprofile) where a replicated write's CPU goes.
func BenchmarkClusterWrites(b *testing.B) {
	dir := b.TempDir()
	c1 := nodeConfig(b, dir, 1)
	c1.Bootstrap = true
	nodes := []*testNode{startNode(b, c1)}
	for id := uint64(2); id <= 3; id++ {
		c := nodeConfig(b, dir, id)
		c.Join = c1.Addr
		nodes = append(nodes, startNode(b, c))
	}
	defer func() {
		for _, n := range nodes {
			n.stop(b)
		}
	}()
	for end := time.Now().Add(30 * time.Second); !allVoters(nodes[0].Node, 3); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			b.Fatal("no three voters in every group")
		}
	}
	ctx := context.Background()
	var next, acked atomic.Int64
	const writers = 64
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			n := nodes[w%3]
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				call := service.Call{Tenant: "acme", Session: "bench", Actor: "alice", RequestID: fmt.Sprintf("r%d", i)}
				for try := 0; try < 50; try++ {
					_, err := n.DeclarePromise(ctx, call, api.PromiseDeclare{Promise: "ship", To: "bob", Until: "2h"})
					if err == nil {
						acked.Add(1)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(w)
	}
	wg.Wait()
	b.ReportMetric(float64(acked.Load())/time.Since(start).Seconds(), "writes/s")
}
