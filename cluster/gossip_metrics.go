package cluster

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"tally/cluster/liveness"
)

var (
	descProbes      = prometheus.NewDesc("tally_liveness_probes_total", "memberlist probes this node sent that were acknowledged.", nil, nil)
	descIndirect    = prometheus.NewDesc("tally_liveness_indirect_probe_rounds_total", "Direct probes that timed out and went to up to 3 indirect probes (memberlist's log).", nil, nil)
	descSuspicions  = prometheus.NewDesc("tally_liveness_suspicions_total", "Suspicions started: by memberlist at this node, and by the deciding table while this node led the meta group.", []string{"layer"}, nil)
	descRefutations = prometheus.NewDesc("tally_liveness_refutations_total", "Refutations: this node's own (its incarnation raised) and those the deciding table took.", nil, nil)
	descGrants      = prometheus.NewDesc("tally_liveness_grants_total", "Late-homework grants given while this node led the meta group.", nil, nil)
	descDenials     = prometheus.NewDesc("tally_liveness_grant_denials_total", "Late-homework requests denied while this node led the meta group, by reason.", []string{"reason"}, nil)
	descDeaths      = prometheus.NewDesc("tally_liveness_committed_deaths_total", "Dead facts this node's detector committed in the meta group.", nil, nil)
	descHealth      = prometheus.NewDesc("tally_liveness_health_score", "This node's health score, 0 (healthy) to 8; its timeouts are stretched by 1 + 0.25 × score.", nil, nil)
	descLate        = prometheus.NewDesc("tally_liveness_late_ticks_total", "Ticks of the failure detector's loop that came late (the node itself did not run on time).", nil, nil)
	descIncarnation = prometheus.NewDesc("tally_liveness_incarnation", "This node's incarnation.", nil, nil)
	descGossipBytes = prometheus.NewDesc("tally_liveness_gossip_sent_bytes_total", "Bytes the failure detector sent (UDP and TCP), this node.", nil, nil)
	gossipDescs     = []*prometheus.Desc{descProbes, descIndirect, descSuspicions, descRefutations, descGrants, descDenials, descDeaths, descHealth, descLate, descIncarnation, descGossipBytes}
)

// gossipCollector reads the failure detector's counters when scraped.
type gossipCollector struct{ g *gossip }

func (gossipCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range gossipDescs {
		ch <- d
	}
}

func (k gossipCollector) Collect(ch chan<- prometheus.Metric) {
	g := k.g
	s := &g.stats
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(descProbes, s.probes.Load())
	counter(descIndirect, s.indirect.Load())
	counter(descSuspicions, s.mlSuspicions.Load(), "memberlist")
	counter(descSuspicions, s.suspicions.Load(), "detector")
	counter(descRefutations, s.refutations.Load())
	counter(descGrants, s.grants.Load())
	for i, d := range liveness.Denials {
		counter(descDenials, s.denials[i].Load(), string(d))
	}
	counter(descDeaths, s.deaths.Load())
	counter(descLate, s.late.Load())
	counter(descGossipBytes, s.sentBytes.Load())
	g.mu.Lock()
	health, inc := g.health.Score(), g.inc
	g.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, float64(health))
	ch <- prometheus.MustNewConstMetric(descIncarnation, prometheus.GaugeValue, float64(inc))
}

// countingTransport is memberlist's own network transport, counting the
// bytes it sends (the gossip's cost per node).
type countingTransport struct {
	*memberlist.NetTransport
	sent *atomic.Uint64
}

func (t countingTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	t.sent.Add(uint64(len(b)))
	return t.NetTransport.WriteTo(b, addr)
}

func (t countingTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	t.sent.Add(uint64(len(b)))
	return t.NetTransport.WriteToAddress(b, a)
}

func (t countingTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{c, t.sent}, nil
}

func (t countingTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	c, err := t.NetTransport.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return countingConn{c, t.sent}, nil
}

var _ memberlist.NodeAwareTransport = countingTransport{}

type countingConn struct {
	net.Conn
	sent *atomic.Uint64
}

func (c countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(uint64(n))
	return n, err
}
