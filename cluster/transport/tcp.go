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
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/node"
)

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
	// pace holds the bodies sent to SnapshotBytesPerSecond.
	pace *pacer
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
		pace:       newPacer(cfg.SnapshotBytesPerSecond),
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
