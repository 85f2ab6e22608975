package transport

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the transport's identity and limits. Start from
// DefaultConfig.
type Config struct {
	NodeID    uint64
	ClusterID string
	Secret    []byte
	// Listen is the address this node accepts peers on ("127.0.0.1:0"
	// picks a port).
	Listen string
	// Peers maps each other node's id to its address.
	Peers map[uint64]string
	// MaxFrameSize bounds one frame of messages on the wire: a larger batch
	// goes as several frames, a larger message is not sent, and a peer
	// announcing a larger frame is disconnected.
	MaxFrameSize int
	// QueueLen bounds the batches waiting for one peer.
	QueueLen int
	// InboxLen bounds received batches waiting for the node's loop; a full
	// inbox stops reading, which pushes back on the sender through TCP.
	InboxLen         int
	DialTimeout      time.Duration
	HandshakeTimeout time.Duration
	// RedialDelay is the pause after a failed connection to a peer.
	RedialDelay time.Duration

	// SpoolDir is where received snapshot bodies are kept until the node
	// has restored them; Listen creates it and removes what an earlier run
	// left there. Empty refuses every snapshot offered.
	SpoolDir string
	// SnapshotChunkSize is the most of a snapshot body a stream holds in
	// memory on either side: the sender writes it in chunks of this size,
	// blocking on the socket, and the receiver reads it so.
	SnapshotChunkSize int
	// MaxSnapshotStreams bounds the snapshot streams under way in each
	// direction, MaxSnapshotStreamsPerPeer those with any one peer. A
	// stream past either waits for a place; past MaxSnapshotStreamsWaiting
	// waiting it is refused, and raft sends the snapshot again later.
	MaxSnapshotStreams        int
	MaxSnapshotStreamsPerPeer int
	MaxSnapshotStreamsWaiting int
	// MaxSnapshotSize bounds a received snapshot's body: a larger one is
	// refused before any of it is spooled.
	MaxSnapshotSize uint64
	// SnapshotIdleTimeout fails a snapshot stream that makes no progress
	// for this long (a chunk not taken or not coming, an answer not given).
	SnapshotIdleTimeout time.Duration
	// SnapshotBytesPerSecond bounds the snapshot bytes the node sends,
	// over all its streams (0: no bound).
	SnapshotBytesPerSecond int64
}

// DefaultMaxFrameSize bounds a frame of messages. It is sized for raft's
// messages, not for snapshots (which stream apart): an append carries at
// most the node's MaxMsgSize of entries (1 MiB), or one entry of at most
// MaxEntrySize (1 MiB), so one message fits with room to spare.
const DefaultMaxFrameSize = 4 << 20

// DefaultSnapshotChunkSize is the snapshot stream's chunk: large enough
// for the disk and the socket to work in big writes, small beside a body.
const DefaultSnapshotChunkSize = 1 << 20

// DefaultSnapshotBytesPerSecond is the snapshot byte rate a node sends
// at most: 128 MiB/s, well within a local disk's, so a re-replication
// leaves room to the writes of the groups it does not change.
const DefaultSnapshotBytesPerSecond = 128 << 20

// DefaultMaxSnapshotSize bounds a received snapshot body (a group's
// sessions' logs): far beyond any group's expected size, but a bound.
const DefaultMaxSnapshotSize = 64 << 30

// DefaultConfig fills in the limits; identity and addresses are the
// caller's.
func DefaultConfig() Config {
	return Config{
		MaxFrameSize:     DefaultMaxFrameSize,
		QueueLen:         256,
		InboxLen:         1024,
		DialTimeout:      time.Second,
		HandshakeTimeout: 2 * time.Second,
		RedialDelay:      200 * time.Millisecond,

		SnapshotChunkSize:         DefaultSnapshotChunkSize,
		MaxSnapshotStreams:        4,
		MaxSnapshotStreamsPerPeer: 2,
		MaxSnapshotStreamsWaiting: 64,
		MaxSnapshotSize:           DefaultMaxSnapshotSize,
		SnapshotIdleTimeout:       30 * time.Second,
		SnapshotBytesPerSecond:    DefaultSnapshotBytesPerSecond,
	}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.NodeID == 0:
		return errors.New("transport config: NodeID must not be 0")
	case c.ClusterID == "":
		return errors.New("transport config: ClusterID is required")
	case len(c.Secret) < 16:
		return errors.New("transport config: Secret must be at least 16 bytes")
	case c.MaxFrameSize < 1024:
		return errors.New("transport config: MaxFrameSize must be at least 1024")
	case c.QueueLen <= 0 || c.InboxLen <= 0:
		return errors.New("transport config: QueueLen and InboxLen must be positive")
	case c.DialTimeout <= 0 || c.HandshakeTimeout <= 0 || c.RedialDelay <= 0:
		return errors.New("transport config: DialTimeout, HandshakeTimeout and RedialDelay must be positive")
	case c.SnapshotChunkSize < 4096:
		return fmt.Errorf("transport config: SnapshotChunkSize %d must be at least 4096", c.SnapshotChunkSize)
	case c.MaxSnapshotStreams <= 0 || c.MaxSnapshotStreamsPerPeer <= 0 || c.MaxSnapshotStreamsPerPeer > c.MaxSnapshotStreams:
		return fmt.Errorf("transport config: MaxSnapshotStreams (%d) and MaxSnapshotStreamsPerPeer (%d) must be positive, the second at most the first",
			c.MaxSnapshotStreams, c.MaxSnapshotStreamsPerPeer)
	case c.MaxSnapshotStreamsWaiting <= 0:
		return fmt.Errorf("transport config: MaxSnapshotStreamsWaiting %d must be positive (every stream waits for its place, if only briefly)", c.MaxSnapshotStreamsWaiting)
	case c.SnapshotIdleTimeout <= 0:
		return errors.New("transport config: SnapshotIdleTimeout must be positive")
	}
	return nil
}
