package server

// The custody of the content store over time, on a server: a scrubber
// re-reads every stored object at Config.ScrubRate (a cluster node's too),
// (a damaged copy a cluster node finds is repaired from another node's),
// and a collector removes the bytes no record references once
// Config.CollectGrace has passed (a cluster node's collection is decided
// by its groups' logs). Their counts are in /metrics.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"tally/artifact"
	"tally/internal/tick"
	"tally/ledgerservice"
	"tally/store"
)

// The custody defaults (serve --scrub-rate, --scrub-every, --collect-grace,
// --collect-every).
const (
	DefaultScrubRate    = 16 << 20 // bytes a second
	DefaultScrubEvery   = 24 * time.Hour
	DefaultCollectGrace = 24 * time.Hour
	DefaultCollectEvery = time.Hour
)

// custody is the server's custody tasks' counts.
type custody struct {
	scrub          artifact.ScrubStats
	collectedBytes atomic.Int64
	collectedObjs  atomic.Int64
}

// register adds the custody counters to reg.
func (c *custody) register(reg prometheus.Registerer) {
	counter := func(name, help string, v *atomic.Int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v.Load()) })
	}
	reg.MustRegister(
		counter("tally_artifact_scrubbed_bytes_total", "Bytes of stored artifacts re-read by the scrubber.", &c.scrub.Bytes),
		counter("tally_artifact_scrubbed_objects_total", "Stored artifacts re-read by the scrubber.", &c.scrub.Objects),
		counter("tally_artifact_damaged_found_total", "Damaged or missing stored copies the scrubber found.", &c.scrub.Damaged),
		counter("tally_artifact_scrub_passes_total", "Whole passes of the scrubber over the content store.", &c.scrub.Passes),
		counter("tally_artifact_collected_bytes_total", "Bytes no record referenced, removed after the grace.", &c.collectedBytes),
		counter("tally_artifact_collected_objects_total", "Stored artifacts no record referenced, removed after the grace.", &c.collectedObjs),
	)
}

// startCustody runs the scrubber and, on a single server, the collector
// until ctx ends.
func (s *Server) startCustody(ctx context.Context) {
	// A cluster node's Root is its replica's ledger directory, whose
	// content store holds the bytes of its groups' records.
	objs, err := artifact.OpenStore(store.ObjectsDir(s.cfg.Root))
	if err != nil {
		s.cfg.Logger.Error("custody: no content store", "err", err)
		return
	}
	if s.cfg.ScrubRate > 0 {
		sc := &artifact.Scrubber{Store: objs, Rate: s.cfg.ScrubRate, Every: s.cfg.ScrubEvery, Logger: s.cfg.Logger, Stats: &s.custody.scrub}
		if r, ok := s.local.(damageRepairer); ok {
			sc.Found = r.FoundDamaged
		}
		go sc.Run(ctx)
	}
	if local, ok := s.local.(artifactCollector); ok && s.cfg.CollectEvery > 0 {
		go s.collectEvery(ctx, local)
	}
}

// damageRepairer is a Service that repairs a damaged or missing copy the
// scrubber finds (a cluster node's, from another node's copy).
type damageRepairer interface {
	FoundDamaged(artifact.Checked)
}

// artifactCollector is a Service that collects its content store:
// ledgerservice.Local by its sessions' records, a cluster node by its
// groups' logs.
type artifactCollector interface {
	CollectArtifacts(ctx context.Context, grace time.Duration) (artifact.Collected, error)
}

var _ artifactCollector = (*ledgerservice.Local)(nil)

// collectEvery collects the content store every Config.CollectEvery.
func (s *Server) collectEvery(ctx context.Context, local artifactCollector) {
	tick.Every(ctx, s.cfg.CollectEvery, func() { s.collect(ctx, local) })
}

// collect runs one collection and counts and logs what it removed.
func (s *Server) collect(ctx context.Context, local artifactCollector) {
	got, err := local.CollectArtifacts(ctx, s.cfg.CollectGrace)
	if err != nil {
		s.cfg.Logger.Error("custody: a collection stopped", "err", err)
	}
	for _, o := range got.Objects {
		s.cfg.Logger.Info("custody: collected bytes no record references", "content", o.Content.String(), "size", o.Size, "put", o.Put)
		s.custody.collectedObjs.Add(1)
	}
	s.custody.collectedBytes.Add(got.Bytes)
}
