package transport

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
)

// Stats counts what the transport did.
type Stats struct {
	SentBatches, SentBytes     atomic.Uint64
	Dropped                    atomic.Uint64 // batches dropped: queue full or too large
	ReceivedBatches            atomic.Uint64
	RefusedPeers, BrokenFrames atomic.Uint64

	// Snapshot streams: those the peer acknowledged whole, those spooled
	// and handed to the node, their bodies' bytes, and the streams that
	// failed (refused, cut, a wrong length or checksum, a timeout).
	SnapshotsSent, SnapshotsReceived           atomic.Uint64
	SnapshotBytesSent, SnapshotBytesReceived   atomic.Uint64
	SnapshotSendFailures, SnapshotRecvFailures atomic.Uint64
}

// Traffic is what the transport sent to one peer for one group: raft
// messages, their encoded bytes, and the snapshots among them.
type Traffic struct {
	Group, Peer                uint64
	Messages, Bytes, Snapshots uint64
}

// traffic counts Traffic by group and peer.
type traffic struct {
	mu sync.Mutex
	by map[[2]uint64]*Traffic
}

func (tr *traffic) add(group, peer uint64, n int, snapshot bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.by == nil {
		tr.by = map[[2]uint64]*Traffic{}
	}
	k := [2]uint64{group, peer}
	t := tr.by[k]
	if t == nil {
		t = &Traffic{Group: group, Peer: peer}
		tr.by[k] = t
	}
	t.Messages++
	t.Bytes += uint64(n)
	if snapshot {
		t.Snapshots++
	}
}

// Traffic is what the transport has sent since it started, by group and
// peer, in that order.
func (t *TCP) Traffic() []Traffic {
	t.traffic.mu.Lock()
	defer t.traffic.mu.Unlock()
	out := make([]Traffic, 0, len(t.traffic.by))
	for _, v := range t.traffic.by {
		out = append(out, *v)
	}
	slices.SortFunc(out, func(a, b Traffic) int {
		if a.Group != b.Group {
			return cmp.Compare(a.Group, b.Group)
		}
		return cmp.Compare(a.Peer, b.Peer)
	})
	return out
}
