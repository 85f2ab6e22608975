package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"tally/claim"
	"tally/expect"
	"tally/ledger"
	"tally/promise"
	"tally/timekeeper"
)

type metrics struct {
	reg      *prometheus.Registry
	appends  prometheus.Counter
	commits  prometheus.Counter
	fsync    prometheus.Histogram
	batch    prometheus.Histogram
	requests *prometheus.HistogramVec
	rpcErrs  *prometheus.CounterVec
	lapses   prometheus.Counter
	notices  prometheus.Counter
	handle   http.Handler
}

func newMetrics(s *Server) *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		appends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_appends_total", Help: "Records appended to session logs.",
		}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tally_commits_total", Help: "Group commits (each one write and one fsync).",
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_fsync_seconds", Help: "Write plus fsync latency of one group commit.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 14),
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_group_commit_records", Help: "Records carried by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		requests: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tally_http_request_seconds", Help: "HTTP request latency by route and status code.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16),
		}, []string{"route", "code"}),
	}
	// A JSON-RPC error is an HTTP 200 answer: counted here by its code.
	m.rpcErrs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tally_a2a_jsonrpc_errors_total", Help: "A2A JSON-RPC error responses by JSON-RPC error code.",
	}, []string{"code"})
	m.lapses = prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_lapses_total", Help: "Lapses committed by the built-in timekeeper."})
	m.notices = prometheus.NewCounter(prometheus.CounterOpts{Name: "tally_deliveries_total", Help: "Notices and lapses the built-in timekeeper delivered."})
	reg.MustRegister(m.appends, m.commits, m.fsync, m.batch, m.requests, m.rpcErrs, m.lapses, m.notices,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&obligations{s: s})
	m.handle = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return m
}

func (m *metrics) commit(ci ledger.CommitInfo) {
	m.commits.Inc()
	m.appends.Add(float64(ci.Records))
	m.fsync.Observe(ci.Fsync.Seconds())
	m.batch.Observe(float64(ci.Records))
}

func (m *metrics) sweep(r timekeeper.Report) {
	m.lapses.Add(float64(r.Lapses))
	m.notices.Add(float64(r.Delivered))
}

func (m *metrics) request(route string, code int, d time.Duration) {
	if code == 0 {
		code = http.StatusOK
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Observe(d.Seconds())
}

func (m *metrics) rpcError(code int) { m.rpcErrs.WithLabelValues(strconv.Itoa(code)).Inc() }

func (m *metrics) handler(w http.ResponseWriter, r *http.Request) { m.handle.ServeHTTP(w, r) }

// obligations computes the open obligations of the open sessions at scrape time.
type obligations struct{ s *Server }

var (
	descOpen = prometheus.NewDesc("tally_obligations", "Obligations in the open sessions, by family and state.",
		[]string{"family", "state"}, nil)
	descOverdue = prometheus.NewDesc("tally_overdue", "Owed promises past their deadline in the open sessions.", nil, nil)
)

func (o *obligations) Describe(ch chan<- *prometheus.Desc) {
	ch <- descOpen
	ch <- descOverdue
	ch <- descWatcherLag
}

// Collect counts over the sessions this server holds open, reading their
// folded state beside the Service on purpose: which sessions are open is
// the session cache's to know, and a scrape must open nothing and render
// no document.
func (o *obligations) Collect(ch chan<- prometheus.Metric) {
	now := o.s.cfg.Ledger.Now()
	counts := map[[2]string]int{}
	overdue := 0
	o.s.eachSession(func(_ string, l *ledger.Ledger) {
		l.Read(func(st *ledger.State) {
			st.Promises.Each(func(p *promise.Promise) bool {
				counts[[2]string{"promise", string(st.Promises.Status(p))}]++
				if st.Promises.Overdue(p, now) {
					overdue++
				}
				return true
			})
			for _, c := range st.Claims.List(claim.Filter{}, now) {
				counts[[2]string{"claim", string(c.State)}]++
			}
			for _, e := range st.Expects.List(expect.Filter{}) {
				counts[[2]string{"expectation", e.State}]++
			}
		})
	})
	for k, n := range counts {
		ch <- prometheus.MustNewConstMetric(descOpen, prometheus.GaugeValue, float64(n), k[0], k[1])
	}
	ch <- prometheus.MustNewConstMetric(descOverdue, prometheus.GaugeValue, float64(overdue))
	ch <- prometheus.MustNewConstMetric(descWatcherLag, prometheus.GaugeValue, o.s.timekeepers.lag(time.Now()))
}
