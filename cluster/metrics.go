package cluster

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"tally/cluster/transport"
)

// metrics are a node's: per group its raft state (collected when scraped)
// and the latency of its proposals and linearizable reads at this node;
// the transport's traffic, the snapshot streams included; the snapshots
// this replica installed.
type metrics struct {
	proposal, readIndex *prometheus.HistogramVec
	// decisions counts the placement driver's decisions at this node, by
	// what became of them: made, done, failed, abandoned.
	decisions *prometheus.CounterVec
	// Custody (custody.go): receipts this node committed, copies here
	// that did not verify, begins refused CustodyPending, and the
	// contents awaiting this node's receipt as of its last sweep.
	receipts, unverified, pendingRefused, awaiting atomic.Int64
	// moves counts the moves this node's mover ended, by outcome
	// (activated, aborted, timed_out); moveFenced is each activated
	// move's fenced time (move.go).
	moves      *prometheus.CounterVec
	moveFenced prometheus.Histogram
	// Bytes beside the log (fetch.go): copies fetched from a holder and
	// stored, their bytes, fetches that failed or did not verify, damaged
	// or missing copies repaired, and receipts withdrawn.
	fetched, fetchedBytes, fetchFailed, repaired, withdrawn atomic.Int64
}

func newMetrics() *metrics {
	buckets := prometheus.ExponentialBuckets(250e-6, 2, 16) // 0.25 ms … 8 s
	return &metrics{
		proposal: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tally_cluster_proposal_seconds", Help: "From proposing a command at this node to its outcome applied here, by group.", Buckets: buckets,
		}, []string{"group"}),
		readIndex: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "tally_cluster_read_index_seconds", Help: "From asking for a read index at this node to having applied it, by group.", Buckets: buckets,
		}, []string{"group"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_cluster_placement_decisions_total", Help: "The placement driver's decisions at this node, by what became of them: made, done, failed, abandoned.",
		}, []string{"state"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tally_cluster_moves_total", Help: "Session moves this node's mover ended, by outcome: activated, aborted, timed_out (aborted for no progress).",
		}, []string{"outcome"}),
		moveFenced: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tally_cluster_move_fenced_seconds", Help: "From a moving session's fence in its source group to its activation in the directory: its writes' stall.", Buckets: buckets,
		}),
	}
}

// custodyCollectors are the custody counts as metrics.
func (m *metrics) custodyCollectors() []prometheus.Collector {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	return []prometheus.Collector{
		counter("tally_cluster_custody_receipts_total", "Custody receipts this node committed: its copy verified whole at the group's placement epoch.", &m.receipts),
		counter("tally_cluster_custody_unverified_total", "Times this node's copy of bytes its groups name did not verify (damaged or missing): no receipt.", &m.unverified),
		counter("tally_cluster_custody_pending_refusals_total", "Check beginnings refused at this node with CustodyPending.", &m.pendingRefused),
		counter("tally_cluster_custody_fetched_total", "Copies this node fetched from a holder, verified whole and stored.", &m.fetched),
		counter("tally_cluster_custody_fetched_bytes_total", "Bytes of the copies this node fetched and stored.", &m.fetchedBytes),
		counter("tally_cluster_custody_fetch_failures_total", "Fetches from a holder that failed or whose bytes did not verify (discarded).", &m.fetchFailed),
		counter("tally_cluster_custody_repaired_total", "Damaged or missing copies at this node repaired from a holder.", &m.repaired),
		counter("tally_cluster_custody_withdrawn_total", "Receipts this node withdrew: its copy was found damaged or missing.", &m.withdrawn),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "tally_cluster_custody_pending", Help: "Contents of this node's groups awaiting its receipt at the current placement epoch, as of its last custody sweep."},
			func() float64 { return float64(m.awaiting.Load()) }),
	}
}

func groupLabel(g uint64) string { return strconv.FormatUint(g, 10) }

var (
	descLeader    = prometheus.NewDesc("tally_cluster_group_leader", "The group's leader as this node knows it (0: none).", []string{"group"}, nil)
	descTerm      = prometheus.NewDesc("tally_cluster_group_term", "The group's raft term at this node.", []string{"group"}, nil)
	descCommit    = prometheus.NewDesc("tally_cluster_group_commit_index", "The group's commit index at this node.", []string{"group"}, nil)
	descApplied   = prometheus.NewDesc("tally_cluster_group_applied_index", "The group's applied index at this node.", []string{"group"}, nil)
	descLeading   = prometheus.NewDesc("tally_cluster_group_is_leader", "1 if this node leads the group.", []string{"group"}, nil)
	descSent      = prometheus.NewDesc("tally_cluster_sent_batches_total", "Message batches sent to peers.", nil, nil)
	descSentBytes = prometheus.NewDesc("tally_cluster_sent_bytes_total", "Bytes of message batches sent to peers.", nil, nil)
	descDropped   = prometheus.NewDesc("tally_cluster_dropped_batches_total", "Batches dropped: a peer's queue full, or a batch over the frame bound.", nil, nil)
	descReceived  = prometheus.NewDesc("tally_cluster_received_batches_total", "Message batches received from peers.", nil, nil)
	descRefused   = prometheus.NewDesc("tally_cluster_refused_peers_total", "Connections from peers refused at the handshake: another cluster's id, or another join secret.", nil, nil)
	descRestores  = prometheus.NewDesc("tally_cluster_snapshots_installed_total", "Group snapshots this replica installed.", nil, nil)
	descFailed    = prometheus.NewDesc("tally_cluster_node_failed", "1 if the node stopped after a disk failure.", nil, nil)
	descGroupMsgs = prometheus.NewDesc("tally_cluster_group_sent_messages_total", "Raft messages this node sent, by group and peer.", []string{"group", "peer"}, nil)
	descGroupByte = prometheus.NewDesc("tally_cluster_group_sent_bytes_total", "Encoded bytes of the raft messages this node sent, by group and peer.", []string{"group", "peer"}, nil)
	descGroupSnap = prometheus.NewDesc("tally_cluster_group_sent_snapshots_total", "Snapshots this node sent, by group and peer.", []string{"group", "peer"}, nil)

	descSnapSent       = prometheus.NewDesc("tally_cluster_snapshots_sent_total", "Snapshots streamed to peers whole and acknowledged by them.", nil, nil)
	descSnapReceived   = prometheus.NewDesc("tally_cluster_snapshots_received_total", "Snapshots received from peers whole, checked and handed to the node.", nil, nil)
	descSnapSentBytes  = prometheus.NewDesc("tally_cluster_snapshot_sent_bytes_total", "Bytes of snapshot bodies streamed to peers.", nil, nil)
	descSnapRecvBytes  = prometheus.NewDesc("tally_cluster_snapshot_received_bytes_total", "Bytes of snapshot bodies received and spooled.", nil, nil)
	descSnapSendFailed = prometheus.NewDesc("tally_cluster_snapshot_send_failures_total", "Snapshot streams to peers that failed: refused, cut, a wrong size, timed out.", nil, nil)
	descSnapRecvFailed = prometheus.NewDesc("tally_cluster_snapshot_receive_failures_total", "Snapshot streams from peers refused or failed: too large, too many, cut, a wrong sum, timed out.", nil, nil)
)

// counter is one of the transport's counters as a metric.
type counter struct {
	desc  *prometheus.Desc
	value func() uint64
}

// transportCounters are the transport's counters, in the order exposed.
func transportCounters(st *transport.Stats) []counter {
	return []counter{
		{descSent, st.SentBatches.Load},
		{descSentBytes, st.SentBytes.Load},
		{descDropped, st.Dropped.Load},
		{descReceived, st.ReceivedBatches.Load},
		{descRefused, st.RefusedPeers.Load},
		{descSnapSent, st.SnapshotsSent.Load},
		{descSnapReceived, st.SnapshotsReceived.Load},
		{descSnapSentBytes, st.SnapshotBytesSent.Load},
		{descSnapRecvBytes, st.SnapshotBytesReceived.Load},
		{descSnapSendFailed, st.SnapshotSendFailures.Load},
		{descSnapRecvFailed, st.SnapshotRecvFailures.Load},
	}
}

// collector reads the node's state when scraped.
type collector struct{ c *Node }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTerm, descCommit, descApplied, descLeading, descRestores, descFailed, descGroupMsgs, descGroupByte, descGroupSnap} {
		ch <- d
	}
	for _, c := range transportCounters(&transport.Stats{}) {
		ch <- c.desc
	}
}

func (k collector) Collect(ch chan<- prometheus.Metric) {
	c := k.c
	for _, g := range c.lastStatus() {
		l := groupLabel(g.Group)
		leading := 0.0
		if g.Leader == c.cfg.NodeID {
			leading = 1
		}
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, float64(g.Leader), l)
		ch <- prometheus.MustNewConstMetric(descTerm, prometheus.GaugeValue, float64(g.Term), l)
		ch <- prometheus.MustNewConstMetric(descCommit, prometheus.GaugeValue, float64(g.Commit), l)
		ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(g.Applied), l)
		ch <- prometheus.MustNewConstMetric(descLeading, prometheus.GaugeValue, leading, l)
	}
	for _, t := range c.tr.Traffic() {
		g, p := groupLabel(t.Group), groupLabel(t.Peer)
		ch <- prometheus.MustNewConstMetric(descGroupMsgs, prometheus.CounterValue, float64(t.Messages), g, p)
		ch <- prometheus.MustNewConstMetric(descGroupByte, prometheus.CounterValue, float64(t.Bytes), g, p)
		ch <- prometheus.MustNewConstMetric(descGroupSnap, prometheus.CounterValue, float64(t.Snapshots), g, p)
	}
	for _, tc := range transportCounters(&c.tr.Stats) {
		ch <- prometheus.MustNewConstMetric(tc.desc, prometheus.CounterValue, float64(tc.value()))
	}
	ch <- prometheus.MustNewConstMetric(descRestores, prometheus.CounterValue, float64(c.sm.Restores()))
	failed := 0.0
	if c.db.Failed() != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(descFailed, prometheus.GaugeValue, failed)
}

// Collectors are the node's metrics, for the server's registry.
func (c *Node) Collectors() []prometheus.Collector {
	return append([]prometheus.Collector{collector{c}, gossipCollector{c.gossip}, c.metrics.proposal, c.metrics.readIndex, c.metrics.decisions, c.metrics.moves, c.metrics.moveFenced, placementCollector{c}}, c.metrics.custodyCollectors()...)
}
