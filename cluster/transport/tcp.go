// Package transport carries raft messages between cluster nodes over TCP:
// one listener per node, one outbound connection per peer carrying the
// messages of every group in batches, a connection of its own per snapshot
// stream (snapshot.go), peers authenticated by the cluster id and a shared
// join secret (an HMAC challenge in each direction, so the secret never
// crosses the wire), and every queue, frame and stream bounded. A slow or
// dead peer costs at most its queue: Send drops a batch when the queue is
// full and raft's own retries recover.
package transport

import (
	"bufio"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/node"
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
}

// DefaultMaxFrameSize bounds a frame of messages. It is sized for raft's
// messages, not for snapshots (which stream apart): an append carries at
// most the node's MaxMsgSize of entries (1 MiB), or one entry of at most
// MaxEntrySize (1 MiB), so one message fits with room to spare.
const DefaultMaxFrameSize = 4 << 20

// DefaultSnapshotChunkSize is the snapshot stream's chunk: large enough
// for the disk and the socket to work in big writes, small beside a body.
const DefaultSnapshotChunkSize = 1 << 20

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

// TCP is the transport. It implements node.Transport.
type TCP struct {
	cfg   Config
	log   *slog.Logger
	ln    net.Listener
	inbox chan []node.Envelope
	Stats Stats
	// traffic is what went to each peer, by group.
	traffic traffic

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	peers  map[uint64]*peer
	conns  map[net.Conn]struct{}

	// Snapshot streams under way or waiting, sending and receiving.
	outStreams, inStreams *streamLimit
}

type peer struct {
	id    uint64
	addr  string
	queue chan []byte // encoded frames
}

var _ node.Transport = (*TCP)(nil)

// Listen starts the transport: it accepts peers and dials each configured
// peer in the background.
func Listen(cfg Config, log *slog.Logger) (*TCP, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("transport: listen %s: %w", cfg.Listen, err)
	}
	if err := prepareSpool(cfg.SpoolDir); err != nil {
		ln.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &TCP{cfg: cfg, log: log, ln: ln, inbox: make(chan []node.Envelope, cfg.InboxLen),
		ctx: ctx, cancel: cancel, peers: map[uint64]*peer{}, conns: map[net.Conn]struct{}{},
		outStreams: newStreamLimit(cfg.MaxSnapshotStreams, cfg.MaxSnapshotStreamsPerPeer, cfg.MaxSnapshotStreamsWaiting),
		inStreams:  newStreamLimit(cfg.MaxSnapshotStreams, cfg.MaxSnapshotStreamsPerPeer, cfg.MaxSnapshotStreamsWaiting)}
	t.wg.Add(1)
	go t.accept()
	for id, addr := range cfg.Peers {
		t.AddPeer(id, addr)
	}
	return t, nil
}

// Addr is the address the transport listens on.
func (t *TCP) Addr() string { return t.ln.Addr().String() }

// Inbox delivers received batches; the node's loop reads it.
func (t *TCP) Inbox() <-chan []node.Envelope { return t.inbox }

// AddPeer starts sending to a peer.
func (t *TCP) AddPeer(id uint64, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.peers[id]; ok || id == t.cfg.NodeID {
		return
	}
	p := &peer{id: id, addr: addr, queue: make(chan []byte, t.cfg.QueueLen)}
	t.peers[id] = p
	t.wg.Add(1)
	go t.sendLoop(p)
}

// Close stops every goroutine and connection.
func (t *TCP) Close() error {
	t.cancel()
	err := t.ln.Close()
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	return err
}

// Send queues one batch for a peer without blocking; a full queue drops
// it. A batch over MaxFrameSize goes as several frames, in order; a single
// message over it is dropped.
func (t *TCP) Send(to uint64, batch []node.Envelope) {
	t.mu.Lock()
	p := t.peers[to]
	t.mu.Unlock()
	if p == nil {
		t.Stats.Dropped.Add(1)
		return
	}
	frames, err := encodeFrames(batch, t.cfg.MaxFrameSize, func(group uint64, n int) { t.traffic.add(group, to, n, false) })
	if err != nil {
		t.Stats.Dropped.Add(1)
		t.log.Warn("transport: message not sent", "to", to, "err", err)
	}
	for _, frame := range frames {
		select {
		case p.queue <- frame:
		default:
			t.Stats.Dropped.Add(1)
		}
	}
}

// encodeFrames packs a batch into frames of at most max bytes: each a
// 4-byte length, then per message its group (uvarint), its length
// (uvarint) and its bytes. A message that fits no frame is left out and
// named in the error; the others still go. sent, when given, is told each
// message's group and encoded size.
func encodeFrames(batch []node.Envelope, max int, sent func(group uint64, n int)) ([][]byte, error) {
	var frames [][]byte
	var errs []error
	// Each message is marshalled straight into its frame, after its size
	// (proto.Size caches it for the marshal): no copy of it on the way.
	sizes := make([]int, len(batch))
	total := 4
	for i, e := range batch {
		sizes[i] = proto.Size(e.Msg)
		total += 2*binary.MaxVarintLen64 + sizes[i]
	}
	buf := make([]byte, 4, min(total, max+4))
	marshal := proto.MarshalOptions{UseCachedSize: true}
	for i, e := range batch {
		size := sizes[i]
		n := uvarintLen(e.Group) + uvarintLen(uint64(size)) + size
		if n > max {
			errs = append(errs, fmt.Errorf("a %s of %d bytes exceeds MaxFrameSize %d", e.Msg.GetType(), n, max))
			continue
		}
		if len(buf)-4+n > max {
			frames = append(frames, sealFrame(buf))
			buf = make([]byte, 4, 256)
		}
		before := len(buf)
		buf = binary.AppendUvarint(buf, e.Group)
		buf = binary.AppendUvarint(buf, uint64(size))
		out, err := marshal.MarshalAppend(buf, e.Msg)
		if err != nil || len(out)-len(buf) != size {
			if err == nil {
				err = fmt.Errorf("%d bytes marshalled, %d sized", len(out)-len(buf), size)
			}
			errs = append(errs, fmt.Errorf("marshal: %w", err))
			buf = buf[:before]
			continue
		}
		buf = out
		if sent != nil {
			sent(e.Group, size)
		}
	}
	if len(buf) > 4 {
		frames = append(frames, sealFrame(buf))
	}
	return frames, errors.Join(errs...)
}

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func sealFrame(buf []byte) []byte {
	binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
	return buf
}

func decodeBatch(frame []byte) ([]node.Envelope, error) {
	var out []node.Envelope
	for len(frame) > 0 {
		g, n := binary.Uvarint(frame)
		if n <= 0 {
			return nil, errors.New("bad group")
		}
		frame = frame[n:]
		l, n := binary.Uvarint(frame)
		if n <= 0 || l > uint64(len(frame)-n) {
			return nil, errors.New("bad message length")
		}
		frame = frame[n:]
		m := &pb.Message{}
		if err := proto.Unmarshal(frame[:l], m); err != nil {
			return nil, fmt.Errorf("message: %w", err)
		}
		frame = frame[l:]
		out = append(out, node.Envelope{Group: g, Msg: m})
	}
	return out, nil
}

func (t *TCP) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *TCP) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
	c.Close()
}

func (t *TCP) sendLoop(p *peer) {
	defer t.wg.Done()
	for t.ctx.Err() == nil {
		c, err := t.dial(p, magic)
		if err != nil {
			t.log.Debug("transport: peer unreachable", "peer", p.id, "err", err)
			select {
			case <-t.ctx.Done():
				return
			case <-time.After(t.cfg.RedialDelay):
			}
			continue
		}
		t.write(p, c)
		t.untrack(c)
	}
}

func (t *TCP) write(p *peer, c net.Conn) {
	w := bufio.NewWriterSize(c, 64<<10)
	for {
		var frame []byte
		select {
		case <-t.ctx.Done():
			return
		case frame = <-p.queue:
		}
		if _, err := w.Write(frame); err != nil {
			return
		}
		t.Stats.SentBatches.Add(1)
		t.Stats.SentBytes.Add(uint64(len(frame)))
		// Coalesce what is already queued into one flush.
		for more := true; more; {
			select {
			case frame = <-p.queue:
				if _, err := w.Write(frame); err != nil {
					return
				}
				t.Stats.SentBatches.Add(1)
				t.Stats.SentBytes.Add(uint64(len(frame)))
			default:
				more = false
			}
		}
		if err := w.Flush(); err != nil {
			return
		}
	}
}

func (t *TCP) dial(p *peer, kind string) (net.Conn, error) {
	d := net.Dialer{Timeout: t.cfg.DialTimeout}
	c, err := d.DialContext(t.ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	if !t.track(c) {
		c.Close()
		return nil, t.ctx.Err()
	}
	c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	if err := t.clientHandshake(c, p.id, kind); err != nil {
		t.untrack(c)
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

func (t *TCP) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		if !t.track(c) {
			c.Close()
			return
		}
		t.wg.Add(1)
		go t.serve(c)
	}
}

func (t *TCP) serve(c net.Conn) {
	defer t.wg.Done()
	defer t.untrack(c)
	c.SetDeadline(time.Now().Add(t.cfg.HandshakeTimeout))
	// One reader for the handshake and the frames: the peer may send its
	// first frame right behind its MAC. Reads wait as long as they need,
	// except on a snapshot stream.
	ic := &idleConn{Conn: c}
	r := bufio.NewReaderSize(ic, 64<<10)
	from, kind, err := t.serverHandshake(r, c)
	if err != nil {
		t.Stats.RefusedPeers.Add(1)
		t.log.Warn("transport: peer refused", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	c.SetDeadline(time.Time{})
	if kind == magicSnapshot {
		ic.idle = t.cfg.SnapshotIdleTimeout
		t.receiveSnapshot(from, r, ic)
		return
	}
	t.readFrames(from, r)
}

// readFrames hands each batch a peer sends to the inbox.
func (t *TCP) readFrames(from uint64, r *bufio.Reader) {
	var scratch []byte // the frame's bytes: decoding copies what it keeps
	for {
		batch, err := t.readBatch(from, r, &scratch)
		if err != nil {
			if errors.Is(err, errBrokenFrame) {
				t.Stats.BrokenFrames.Add(1)
				t.log.Warn("transport: bad frame", "peer", from, "err", err)
			}
			return
		}
		t.Stats.ReceivedBatches.Add(1)
		select {
		case t.inbox <- batch:
		case <-t.ctx.Done():
			return
		}
	}
}

// errBrokenFrame marks a frame a peer should not have sent, as against the
// connection ending.
var errBrokenFrame = errors.New("broken frame")

// readBatch reads one frame of messages, every one of them from the
// authenticated peer. scratch, if not nil, is a buffer to read the frame
// into, grown as needed and kept for the next (up to 1 MiB): the decoded
// messages copy their bytes out of it.
func (t *TCP) readBatch(from uint64, r io.Reader, scratch *[]byte) ([]node.Envelope, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if int64(n) > int64(t.cfg.MaxFrameSize) {
		return nil, fmt.Errorf("%w: %d bytes over MaxFrameSize %d", errBrokenFrame, n, t.cfg.MaxFrameSize)
	}
	var frame []byte
	switch {
	case scratch != nil && cap(*scratch) >= int(n):
		frame = (*scratch)[:n]
	case scratch != nil && n <= 1<<20:
		*scratch = make([]byte, n, max(n, 64<<10))
		frame = *scratch
	default:
		frame = make([]byte, n)
	}
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, err
	}
	batch, err := decodeBatch(frame)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBrokenFrame, err)
	}
	for _, e := range batch {
		if e.Msg.GetFrom() != from {
			return nil, fmt.Errorf("%w: a message claims to be from node %d", errBrokenFrame, e.Msg.GetFrom())
		}
	}
	return batch, nil
}

// The handshake. The dialer sends hello: magic, its node id, the cluster id
// and a nonce. The listener answers with its own nonce and a MAC over both
// nonces, both ids and the cluster id; the dialer checks it and answers
// with its MAC. A wrong cluster id or secret fails on whichever side checks
// first; the refusal says which.

// The hello's magic says what the connection carries: frames of messages,
// or one snapshot stream. Both authenticate the same way.
const (
	magic         = "TALLYRAFT1"
	magicSnapshot = "TALLYSNAP1"
)

const (
	refuseCluster = "wrong cluster id"
	refuseAuth    = "authentication failed"
)

func (t *TCP) mac(role string, client, server uint64, nc, ns []byte) []byte {
	h := hmac.New(sha256.New, t.cfg.Secret)
	h.Write([]byte(role))
	h.Write([]byte(t.cfg.ClusterID))
	h.Write(binary.BigEndian.AppendUint64(nil, client))
	h.Write(binary.BigEndian.AppendUint64(nil, server))
	h.Write(nc)
	h.Write(ns)
	return h.Sum(nil)
}

func writeField(w io.Writer, b []byte) error {
	if _, err := w.Write(binary.BigEndian.AppendUint16(nil, uint16(len(b)))); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

func readField(r io.Reader, max int) ([]byte, error) {
	var l [2]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(l[:]))
	if n > max {
		return nil, fmt.Errorf("handshake field of %d bytes, limit %d", n, max)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}

func nonce() []byte {
	b := make([]byte, 32)
	rand.Read(b)
	return b
}

func (t *TCP) clientHandshake(c net.Conn, server uint64, kind string) error {
	nc := nonce()
	for _, f := range [][]byte{[]byte(kind), binary.BigEndian.AppendUint64(nil, t.cfg.NodeID), []byte(t.cfg.ClusterID), nc} {
		if err := writeField(c, f); err != nil {
			return err
		}
	}
	status, err := readField(c, 256)
	if err != nil {
		return fmt.Errorf("handshake: %w", err)
	}
	if string(status) != "ok" {
		return fmt.Errorf("handshake: refused by peer %d: %s", server, status)
	}
	sid, err := readField(c, 8)
	if err != nil || len(sid) != 8 {
		return fmt.Errorf("handshake: peer id: %v", err)
	}
	if got := binary.BigEndian.Uint64(sid); got != server {
		return fmt.Errorf("handshake: dialed node %d, answered by node %d", server, got)
	}
	ns, err := readField(c, 64)
	if err != nil {
		return err
	}
	smac, err := readField(c, 64)
	if err != nil {
		return err
	}
	if !hmac.Equal(smac, t.mac("server", t.cfg.NodeID, server, nc, ns)) {
		return fmt.Errorf("handshake: peer %d: %s", server, refuseAuth)
	}
	return writeField(c, t.mac("client", t.cfg.NodeID, server, nc, ns))
}

func (t *TCP) serverHandshake(r *bufio.Reader, c net.Conn) (uint64, string, error) {
	m, err := readField(r, 64)
	if err != nil || (string(m) != magic && string(m) != magicSnapshot) {
		return 0, "", fmt.Errorf("handshake: not a tally raft peer")
	}
	client, err := t.serverAuth(r, c)
	return client, string(m), err
}

// serverAuth is the listener's side of the handshake after the magic.
func (t *TCP) serverAuth(r *bufio.Reader, c net.Conn) (uint64, error) {
	cid, err := readField(r, 8)
	if err != nil || len(cid) != 8 {
		return 0, fmt.Errorf("handshake: node id: %v", err)
	}
	client := binary.BigEndian.Uint64(cid)
	cluster, err := readField(r, 256)
	if err != nil {
		return 0, err
	}
	nc, err := readField(r, 64)
	if err != nil {
		return 0, err
	}
	if string(cluster) != t.cfg.ClusterID {
		writeField(c, []byte(refuseCluster))
		return 0, fmt.Errorf("handshake: node %d: %s %q", client, refuseCluster, cluster)
	}
	ns := nonce()
	for _, f := range [][]byte{[]byte("ok"), binary.BigEndian.AppendUint64(nil, t.cfg.NodeID), ns, t.mac("server", client, t.cfg.NodeID, nc, ns)} {
		if err := writeField(c, f); err != nil {
			return 0, err
		}
	}
	cmac, err := readField(r, 64)
	if err != nil {
		return 0, fmt.Errorf("handshake: node %d: %w", client, err)
	}
	if !hmac.Equal(cmac, t.mac("client", client, t.cfg.NodeID, nc, ns)) {
		return 0, fmt.Errorf("handshake: node %d: %s", client, refuseAuth)
	}
	return client, nil
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
