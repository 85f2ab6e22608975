package liveness

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Vivaldi coordinates (github.com/hashicorp/serf/coordinate: 8 dimensions,
// a height for the access link, an error estimate), learnt from the round
// trips of acknowledged probes. They set probe deadlines only: requests
// follow the directory, never a coordinate.
const (
	// CoordinateDimensions is the coordinate's dimensions (serf's default,
	// the seed's eight).
	CoordinateDimensions = 8
	// SamplesMin is how many round trips to a peer the observer needs
	// before it trusts the estimate to it (serf's latency filter's size);
	// before, a probe to it takes the conservative deadline.
	SamplesMin = 3
)

// Vivaldi is one node's coordinate and the round trips it learnt from. It
// is safe for concurrent use.
type Vivaldi struct {
	client *coordinate.Client
	cfg    *coordinate.Config

	mu      sync.Mutex
	samples map[string]int
}

// NewVivaldi is a coordinate at the origin, with the largest error.
func NewVivaldi() *Vivaldi {
	cfg := coordinate.DefaultConfig()
	cfg.Dimensionality = CoordinateDimensions
	c, err := coordinate.NewClient(cfg)
	if err != nil {
		panic("liveness: coordinate config: " + err.Error()) // the default config is valid
	}
	return &Vivaldi{client: c, cfg: cfg, samples: map[string]int{}}
}

// Coordinate is the node's coordinate now (a copy).
func (v *Vivaldi) Coordinate() *coordinate.Coordinate { return v.client.GetCoordinate() }

// Observe updates the coordinate from an acknowledged probe to peer, whose
// coordinate its ack carried, that took rtt.
func (v *Vivaldi) Observe(peer string, other *coordinate.Coordinate, rtt time.Duration) error {
	if other == nil {
		return fmt.Errorf("coordinate of %s: none", peer)
	}
	if _, err := v.client.Update(peer, other, rtt); err != nil {
		return fmt.Errorf("coordinate of %s: %w", peer, err)
	}
	v.mu.Lock()
	v.samples[peer]++
	v.mu.Unlock()
	return nil
}

// Forget drops what was learnt from peer (it left).
func (v *Vivaldi) Forget(peer string) {
	v.client.ForgetNode(peer)
	v.mu.Lock()
	delete(v.samples, peer)
	v.mu.Unlock()
}

// Estimate predicts the round trip to peer at coordinate other: the
// coordinates' distance, and as margin that distance times the two
// errors' sum. It is not Valid (take the conservative default) with fewer
// than SamplesMin round trips to peer, a missing, invalid or incompatible
// coordinate, or either error still at its maximum.
func (v *Vivaldi) Estimate(peer string, other *coordinate.Coordinate) Estimate {
	v.mu.Lock()
	n := v.samples[peer]
	v.mu.Unlock()
	return estimate(v.Coordinate(), other, n, v.cfg.VivaldiErrorMax)
}

func estimate(mine, other *coordinate.Coordinate, samples int, errorMax float64) Estimate {
	if samples < SamplesMin || other == nil || !other.IsValid() || !mine.IsValid() || !mine.IsCompatibleWith(other) ||
		mine.Error >= errorMax || other.Error >= errorMax {
		return Estimate{}
	}
	rtt := mine.DistanceTo(other)
	return Estimate{RTT: rtt, Margin: time.Duration(float64(rtt) * (mine.Error + other.Error)), Valid: true}
}
