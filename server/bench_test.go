package server

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"tally/api"
	"tally/ledger"
	"tally/promise"
	"tally/store"
)

// loadServer is a real server on a 127.0.0.1 listener over a fresh ledger
// directory, with a real token and a keep-alive client sized for many
// concurrent connections.
type loadServer struct {
	srv    *Server
	ts     *httptest.Server
	root   string
	token  string
	client *http.Client
}

// newLoadServer starts the server as `tally serve` configures it (JSON
// request log, real clock, built-in timekeeper), logging to io.Discard so the
// log's formatting is paid but no terminal is. With stub set, promise writes
// are answered without the ledger.
func newLoadServer(tb testing.TB, conns int, stub bool) *loadServer {
	tb.Helper()
	root := tb.TempDir()
	if err := store.Init(root); err != nil {
		tb.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Root = root
	cfg.Logger = slog.New(slog.NewJSONHandler(io.Discard, nil))
	cfg.Ledger.Logger = cfg.Logger
	s, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	if stub {
		s.stubWrite = stubDeclare(s)
	}
	tok, _, err := fileTokens(s).Create("acme", "https://example.org/agents/reviewer", "agent", time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute, DisableCompression: true}
	ls := &loadServer{srv: s, ts: ts, root: root, token: tok, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	tb.Cleanup(ls.close)
	return ls
}

func (ls *loadServer) close() {
	ls.client.CloseIdleConnections()
	ls.ts.Close()
	ls.srv.Close()
}

// stubDeclare answers a declaration with the document the ledger's write
// would produce (the same members and sizes), without deciding or appending
// anything.
func stubDeclare(s *Server) func(cmd promise.Command, p principal) []byte {
	var seq atomic.Uint64
	return func(cmd promise.Command, p principal) []byte {
		d, ok := cmd.(promise.Declare)
		if !ok {
			panic("stubWrite: only declarations")
		}
		if d.ID == "" {
			d.ID = ledger.MintID()
		}
		state := promise.Owed
		if d.On != "" {
			state = promise.Conditional
		}
		v := promise.View{ID: d.ID, Promise: d.Text, By: cmp.Or(d.By, p.actor), To: d.To, On: d.On, Task: d.Task, Until: d.Until,
			Horizons: []time.Time{d.Until}, State: state, Declared: s.cfg.Ledger.Now().UTC(), Meta: d.Meta, Seq: seq.Add(1)}
		return api.PromiseWrite(v.Seq, &v, nil)
	}
}

// rawClient is a lean HTTP/1.1 keep-alive client for the load generator:
// one connection, requests written as bytes, responses read by their
// Content-Length. net/http's client costs about as much CPU a request as
// the server does, and here it shares the server's 2 cores; a load
// generator that weighs less lets the figures show the server.
type rawClient struct {
	conn net.Conn
	r    *bufio.Reader
	head []byte // the request line and headers up to Content-Length
	buf  []byte
}

func (ls *loadServer) dialRaw() (*rawClient, error) {
	conn, err := net.Dial("tcp", ls.ts.Listener.Addr().String())
	if err != nil {
		return nil, err
	}
	head := fmt.Appendf(nil, "POST %s/promises HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: ",
		base, ls.ts.Listener.Addr(), ls.token)
	return &rawClient{conn: conn, r: bufio.NewReaderSize(conn, 16<<10), head: head}, nil
}

// post sends body and returns the status and the response body (valid until
// the next call).
func (c *rawClient) post(body []byte) (int, []byte, error) {
	c.buf = append(strconv.AppendInt(append(c.buf[:0], c.head...), int64(len(body)), 10), "\r\n\r\n"...)
	c.buf = append(c.buf, body...)
	if _, err := c.conn.Write(c.buf); err != nil {
		return 0, nil, err
	}
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(line) < 12 {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	code, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, nil, fmt.Errorf("bad status line %q", line)
	}
	n := -1
	for {
		h, err := c.r.ReadSlice('\n')
		if err != nil {
			return 0, nil, err
		}
		if len(h) <= 2 {
			break
		}
		if len(h) > 16 && strings.EqualFold(string(h[:15]), "Content-Length:") {
			n, err = strconv.Atoi(strings.TrimSpace(string(h[15:])))
			if err != nil {
				return 0, nil, fmt.Errorf("bad header %q", h)
			}
		}
	}
	if n < 0 {
		return 0, nil, errors.New("response without Content-Length")
	}
	c.buf = slices.Grow(c.buf[:0], n)[:n]
	if _, err := io.ReadFull(c.r, c.buf); err != nil {
		return 0, nil, err
	}
	return code, c.buf, nil
}

// loadResult is what one run of the load generator saw.
type loadResult struct {
	elapsed  time.Duration
	cpu      time.Duration   // CPU time of the whole process (server and clients)
	latency  []time.Duration // one per request
	acked    []string        // ids of the writes answered 201
	failures int             // requests not answered 201
	failure  string          // the first failure
}

// declareLoad has clients concurrent clients declare n promises in all
// (fresh ids prefix-0 … prefix-(n-1)), each waiting for its answer before
// sending the next, over keep-alive connections.
func (ls *loadServer) declareLoad(clients, n int, prefix string) loadResult {
	return ls.declareLoadWith(clients, n, prefix, false)
}

// declareLoadWith is declareLoad with net/http's client or, raw set, with
// rawClient.
func (ls *loadServer) declareLoadWith(clients, n int, prefix string, raw bool) loadResult {
	url := ls.ts.URL + base + "/promises"
	auth := "Bearer " + ls.token
	var next atomic.Int64
	var mu sync.Mutex
	res := loadResult{latency: make([]time.Duration, 0, n), acked: make([]string, 0, n)}
	var wg sync.WaitGroup
	start, cpu := time.Now(), processCPU()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n/clients+1)
			var acked []string
			var fails int
			var failure string
			var body []byte
			var rc *rawClient
			if raw {
				var err error
				if rc, err = ls.dialRaw(); err != nil {
					mu.Lock()
					res.failures++
					res.failure = err.Error()
					mu.Unlock()
					return
				}
				defer rc.conn.Close()
			}
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					break
				}
				id := fmt.Sprintf("%s-%d", prefix, i)
				body = fmt.Appendf(body[:0], `{"id":%q,"promise":"hand back a reviewed schema","to":"https://example.org/agents/author","until":"2h"}`, id)
				var code int
				var got []byte
				var err error
				t := time.Now()
				if raw {
					code, got, err = rc.post(body)
				} else {
					req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
					req.Header.Set("Authorization", auth)
					req.Header.Set("Content-Type", "application/json")
					var resp *http.Response
					if resp, err = ls.client.Do(req); err == nil {
						code = resp.StatusCode
						got, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
				}
				lat = append(lat, time.Since(t))
				if err != nil || code != http.StatusCreated || !bytes.Contains(got, []byte(`"id":"`+id+`"`)) {
					fails++
					failure = fmt.Sprintf("%s: %d %s %v", id, code, got, err)
					if raw && err != nil {
						break // the connection is no longer in step
					}
					continue
				}
				acked = append(acked, id)
			}
			mu.Lock()
			res.latency = append(res.latency, lat...)
			res.acked = append(res.acked, acked...)
			res.failures += fails
			if failure != "" {
				res.failure = failure
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.elapsed, res.cpu = time.Since(start), processCPU()-cpu
	return res
}

// add accumulates another run into r.
func (r *loadResult) add(o loadResult) {
	r.elapsed += o.elapsed
	r.cpu += o.cpu
	r.latency = append(r.latency, o.latency...)
	r.acked = append(r.acked, o.acked...)
	r.failures += o.failures
	if o.failure != "" {
		r.failure = o.failure
	}
}

func (r *loadResult) rate() float64 { return float64(len(r.acked)) / r.elapsed.Seconds() }

// cpuPerRequest is the process's CPU time per acknowledged write, in µs.
func (r *loadResult) cpuPerRequest() float64 {
	return float64(r.cpu) / float64(time.Microsecond) / float64(len(r.acked))
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentile returns the q-quantile (0 < q ≤ 1) of the latencies, in ms.
func (r *loadResult) percentile(q float64) float64 {
	if len(r.latency) == 0 {
		return 0
	}
	l := slices.Clone(r.latency)
	slices.Sort(l)
	i := int(q*float64(len(l))+0.999999) - 1
	return float64(l[max(i, 0)]) / float64(time.Millisecond)
}

// checkPresentOnce lists every promise of the session over HTTP and fails
// unless each acknowledged id is there exactly once and nothing else is.
func (ls *loadServer) checkPresentOnce(tb testing.TB, acked []string) {
	tb.Helper()
	req, _ := http.NewRequest("GET", ls.ts.URL+base+"/promises?state=all", nil)
	req.Header.Set("Authorization", "Bearer "+ls.token)
	resp, err := ls.client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Promises []struct {
			ID string `json:"id"`
		} `json:"promises"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != http.StatusOK {
		tb.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	ids := make([]string, len(doc.Promises))
	for i, p := range doc.Promises {
		ids[i] = p.ID
	}
	checkOnce(tb, "listed", ids, acked)
}

// checkOnce fails unless have holds every id of want exactly once and
// nothing else.
func checkOnce(tb testing.TB, where string, have, want []string) {
	tb.Helper()
	count := make(map[string]int, len(have))
	for _, id := range have {
		count[id]++
	}
	for _, id := range want {
		if count[id] != 1 {
			tb.Fatalf("%s: acknowledged write %s present %d times", where, id, count[id])
		}
	}
	if len(have) != len(want) {
		tb.Fatalf("%s: %d promises, %d acknowledged writes", where, len(have), len(want))
	}
}

// BenchmarkHTTPDurableWrites measures promise declarations over HTTP, each
// acknowledged only once fsynced, from 1 client and from 64 concurrent
// clients, and 64 clients against the same server answering the same
// requests without the ledger (same router, token check, body decoding and
// response document). b.N requests per leg, in rounds that alternate the
// legs so that all three see the same minutes of a shared machine.
//
//	go test ./server -run '^$' -bench '^BenchmarkHTTPDurableWrites$' -benchtime 6000x
func BenchmarkHTTPDurableWrites(b *testing.B) { benchHTTPDurableWrites(b, false) }

// BenchmarkHTTPDurableWritesLeanClient is the same with rawClient as the
// load generator: the same requests and checks, less of the 2 cores spent
// on the client's side.
//
//	go test ./server -run '^$' -bench '^BenchmarkHTTPDurableWritesLeanClient$' -benchtime 6000x
func BenchmarkHTTPDurableWritesLeanClient(b *testing.B) { benchHTTPDurableWrites(b, true) }

func benchHTTPDurableWrites(b *testing.B, raw bool) {
	const clients = 64
	durable := newLoadServer(b, clients, false)
	stub := newLoadServer(b, clients, true)
	// Open the sessions and warm the connections outside the measurement.
	durable.declareLoad(clients, clients, "warm")
	stub.declareLoad(clients, clients, "warm")
	warm := []string{}
	for i := 0; i < clients; i++ {
		warm = append(warm, fmt.Sprintf("warm-%d", i))
	}

	rounds := 1
	if b.N >= 600 {
		rounds = 3
	}
	var one, many, noop loadResult
	l, err := durable.srv.session("acme", "main")
	if err != nil {
		b.Fatal(err)
	}
	// The stub appends nothing, so its session would stay empty and be
	// removed whenever no request holds it (a refused first write leaves
	// nothing), and reopened by the next: pinned, the baseline measures
	// the request path without the ledger, as it says.
	if _, err := stub.srv.session("acme", "main"); err != nil {
		b.Fatal(err)
	}
	var records, fsyncs uint64
	b.ResetTimer()
	for r := 0; r < rounds; r++ {
		n := b.N / rounds
		if r == rounds-1 {
			n = b.N - n*(rounds-1)
		}
		one.add(durable.declareLoadWith(1, n, fmt.Sprintf("one%d", r), raw))
		before := l.Stats()
		many.add(durable.declareLoadWith(clients, n, fmt.Sprintf("many%d", r), raw))
		after := l.Stats()
		records, fsyncs = records+after.Appended-before.Appended, fsyncs+after.Commits-before.Commits
		noop.add(stub.declareLoadWith(clients, n, fmt.Sprintf("noop%d", r), raw))
	}
	b.StopTimer()

	for name, r := range map[string]*loadResult{"1 client": &one, "64 clients": &many, "64 clients, no ledger": &noop} {
		if r.failures > 0 {
			b.Fatalf("%s: %d requests not acknowledged, e.g. %s", name, r.failures, r.failure)
		}
	}
	durable.checkPresentOnce(b, slices.Concat(warm, one.acked, many.acked))
	if rep := l.Verify(); !rep.Whole() || rep.Lines != uint64(clients+2*b.N) {
		b.Fatalf("verify: %+v, want %d lines", rep, clients+2*b.N)
	}
	if log := stub.root + "/sessions/acme/main/log.jsonl"; fileSize(log) > 0 {
		b.Fatalf("the stub server wrote %d bytes to its log", fileSize(log))
	}

	b.ReportMetric(one.rate(), "w1_writes/s")
	b.ReportMetric(many.rate(), "w64_writes/s")
	b.ReportMetric(noop.rate(), "noop64_writes/s")
	b.ReportMetric(many.rate()/one.rate(), "ratio_64_vs_1")
	b.ReportMetric(many.rate()/noop.rate(), "ratio_64_vs_noop")
	b.ReportMetric(many.percentile(0.50), "p50_ms")
	b.ReportMetric(many.percentile(0.99), "p99_ms")
	b.ReportMetric(noop.rate()/one.rate(), "ratio_noop64_vs_1")
	b.ReportMetric(many.cpuPerRequest(), "cpu_us/w64")
	b.ReportMetric(noop.cpuPerRequest(), "cpu_us/noop64")
	b.ReportMetric(float64(records)/float64(max(fsyncs, 1)), "w64_records/fsync")
	if b.N < 100 {
		return // the probe run: its table would crowd out the real one
	}
	b.Logf("%d requests a leg in %d rounds", b.N, rounds)
	b.Logf("%-22s %10s %8s %8s %12s", "leg", "writes/s", "p50 ms", "p99 ms", "CPU µs/write")
	for _, leg := range []struct {
		name string
		r    *loadResult
	}{{"1 client", &one}, {"64 clients", &many}, {"64 clients, no ledger", &noop}} {
		b.Logf("%-22s %10.0f %8.2f %8.2f %12.1f", leg.name, leg.r.rate(), leg.r.percentile(0.5), leg.r.percentile(0.99), leg.r.cpuPerRequest())
	}
	b.Logf("64 vs 1: %.2f× (target ≥ 15×)   64 vs no ledger: %.2f× (target ≥ 0.3×)   no ledger at 64 vs 1: %.2f×",
		many.rate()/one.rate(), many.rate()/noop.rate(), noop.rate()/one.rate())
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
