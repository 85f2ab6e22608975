package mcp_test

// The MCP figures (BENCHMARKS.md, "MCP"): a declaration as a tool call over
// stdio against the same declaration as an in-process Service call and a
// raw write+fdatasync, interleaved in one run; and concurrent tool calls
// over one stdio session sharing fsyncs through the group commit.
//
//	go test ./mcp -run '^$' -bench BenchmarkMCP -benchtime 2000x -count 1

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"tally/api"
	"tally/ledger"
	"tally/mcp"
	"tally/service"
)

// stdioClient connects to s over two OS pipes, as a host that launched
// `tally mcp` does: newline-delimited JSON-RPC through file descriptors.
func (f *fixture) stdioClient(s *mcp.Server) *sdk.ClientSession {
	f.t.Helper()
	serverIn, clientOut, err := os.Pipe()
	if err != nil {
		f.t.Fatal(err)
	}
	clientIn, serverOut, err := os.Pipe()
	if err != nil {
		f.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(context.Background(), &sdk.IOTransport{Reader: serverIn, Writer: serverOut})
	}()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "0"}, nil).Connect(context.Background(), &sdk.IOTransport{Reader: clientIn, Writer: clientOut}, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		cs.Close()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			f.t.Error("the stdio server did not stop")
		}
	})
	return cs
}

// commits counts the fixture's commits and the records they appended.
type commits struct{ batches, records atomic.Int64 }

func (f *fixture) countCommits() *commits {
	c := &commits{}
	f.sessions.cfg.Observe = func(ci ledger.CommitInfo) {
		c.batches.Add(1)
		c.records.Add(int64(ci.Records))
	}
	return c
}

// quantiles are the median and the 99th percentile of ds.
func quantiles(ds []time.Duration) (median, p99 time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[len(ds)*99/100]
}

// BenchmarkMCPDeclare: each iteration is one declaration by each of the
// three ways and one read over stdio, interleaved, so the machine's minute
// is the same for all.
func BenchmarkMCPDeclare(b *testing.B) {
	f := newFixture(b)
	cs := f.stdioClient(f.server(mcp.Who{Actor: "reviewer"}))
	ctx := context.Background()
	raw, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	line := []byte(`{"ts":"2026-08-28T20:14:03Z","type":"promise","id":"bench-000000","promise":"hand back a reviewed schema","by":"reviewer","to":"author","until":"2026-09-01T17:00:00Z"}` + "\n")
	if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise", Arguments: declare(declareShip)}); err != nil || res.IsError {
		b.Fatalf("declare: %v %v", err, res)
	}
	var viaMCP, readMCP, viaService, viaFsync []time.Duration
	c := service.Call{Tenant: "default", Session: "direct", Actor: "reviewer"}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise", Arguments: map[string]any{"action": "declare",
			"id": fmt.Sprintf("mcp-%d", i), "promise": "hand back a reviewed schema", "to": "author", "until": "2026-09-01T17:00:00Z"}})
		viaMCP = append(viaMCP, time.Since(start))
		if err != nil || res.IsError {
			b.Fatalf("declare over stdio: %v %v", err, res)
		}
		start = time.Now()
		if _, err := f.svc.DeclarePromise(ctx, c, api.PromiseDeclare{ID: fmt.Sprintf("svc-%d", i), Promise: "hand back a reviewed schema", To: "author", Until: "2026-09-01T17:00:00Z"}); err != nil {
			b.Fatal(err)
		}
		viaService = append(viaService, time.Since(start))
		start = time.Now()
		if _, err := raw.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := raw.Sync(); err != nil {
			b.Fatal(err)
		}
		viaFsync = append(viaFsync, time.Since(start))
		// A read over stdio: the protocol's own cost, with no fsync.
		start = time.Now()
		if res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise_read", Arguments: map[string]any{"action": "show", "id": "desk/ship-91"}}); err != nil || res.IsError {
			b.Fatalf("show over stdio: %v %v", err, res)
		}
		readMCP = append(readMCP, time.Since(start))
	}
	b.StopTimer()
	for _, m := range []struct {
		name string
		ds   []time.Duration
	}{{"mcp_stdio", viaMCP}, {"service", viaService}, {"fsync", viaFsync}, {"mcp_show", readMCP}} {
		med, p99 := quantiles(m.ds)
		b.ReportMetric(float64(med.Microseconds()), m.name+"_median_µs")
		b.ReportMetric(float64(p99.Microseconds()), m.name+"_p99_µs")
	}
	mm, mp := quantiles(viaMCP)
	sm, sp := quantiles(viaService)
	b.ReportMetric(float64(mm)/float64(sm), "median_ratio")
	b.ReportMetric(float64(mp)/float64(sp), "p99_ratio")
}

// BenchmarkMCPConcurrent16: 16 tool calls at once over one stdio session,
// b.N rounds; the records each fsync carried.
func BenchmarkMCPConcurrent16(b *testing.B) {
	f := newFixture(b)
	n := f.countCommits()
	cs := f.stdioClient(f.server(mcp.Who{Actor: "reviewer"}))
	b.ResetTimer()
	start := time.Now()
	concurrentDeclares(b, cs, b.N, 16)
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(n.records.Load())/float64(n.batches.Load()), "records/fsync")
	b.ReportMetric(float64(16*b.N)/elapsed.Seconds(), "calls/s")
}

// concurrentDeclares makes rounds of width declarations at once.
func concurrentDeclares(tb testing.TB, cs *sdk.ClientSession, rounds, width int) {
	tb.Helper()
	ctx := context.Background()
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		errs := make(chan error, width)
		for i := 0; i < width; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tally_promise", Arguments: map[string]any{"action": "declare",
					"id": fmt.Sprintf("c-%d-%d", r, i), "promise": "x", "to": "author", "until": "2026-09-01T17:00:00Z"}})
				if err == nil && res.IsError {
					err = fmt.Errorf("refused: %s", text(res))
				}
				if err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			tb.Fatal(err)
		}
	}
}

// Concurrent tool calls over one stdio session go through the group
// commit: 16 at once share fsyncs (one fsync each would be 1 record each).
func TestConcurrentCallsShareFsyncs(t *testing.T) {
	f := newFixture(t)
	n := f.countCommits()
	cs := f.stdioClient(f.server(mcp.Who{Actor: "reviewer"}))
	concurrentDeclares(t, cs, 10, 16)
	if n.records.Load() != 160 {
		t.Fatalf("%d records", n.records.Load())
	}
	per := float64(n.records.Load()) / float64(n.batches.Load())
	t.Logf("160 declarations in %d fsyncs: %.1f records/fsync", n.batches.Load(), per)
	if per < 1.5 {
		t.Fatalf("%.2f records per fsync: the calls did not share fsyncs", per)
	}
}
