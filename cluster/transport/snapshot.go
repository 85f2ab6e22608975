package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zeebo/blake3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

// Snapshot streams. A snapshot goes on a connection of its own (hello
// magicSnapshot, authenticated like the message connection), so heartbeats
// and appends never wait behind it:
//
//	sender → the MsgSnap as one frame (its Data is the manifest), the
//	         body's size (8 bytes)
//	receiver → "go" once it has a place for the stream, or why not (too
//	           large, too many streams, no spool)
//	sender → the body, in chunks of SnapshotChunkSize, then its BLAKE3
//	         sum (32 bytes)
//	receiver → "ok" once the body is spooled, checked, and stepped by
//	           its node; or why not
//
// Neither side holds more than a chunk of the body: the sender writes it
// as the state machine produces it, blocking on the socket when the peer
// is slow, and the receiver spools it to a file under SpoolDir, which it
// hands to the node with the MsgSnap. A stream cut anywhere, a wrong size
// or sum, or no progress for SnapshotIdleTimeout fails on both sides and
// leaves no spool.

// sumContext is the BLAKE3 derive-key context of a body's checksum.
const sumContext = "tally 2026-12 cluster snapshot body v1"

// Answers on a snapshot stream; a refusal is its reason, cut to
// maxAnswer bytes.
const (
	answerGo  = "go"
	answerOK  = "ok"
	maxAnswer = 256
)

// spoolPattern names spool files, so that Listen removes only its own.
const spoolPattern = "snapshot-*.spool"

// prepareSpool creates the spool directory, readable by this user only
// (it holds sessions' logs), and removes the spools a crash left.
func prepareSpool(dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("transport: spool directory: %w", err)
	}
	left, err := filepath.Glob(filepath.Join(dir, spoolPattern))
	if err != nil {
		return fmt.Errorf("transport: spool directory: %w", err)
	}
	for _, f := range left {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("transport: remove a leftover spool: %w", err)
		}
	}
	return nil
}

// streamLimit admits snapshot streams: at most maxTotal under way, and
// maxPerPeer with any one peer; the others wait their turn, at most
// maxWaiting of them, and past that are refused.
type streamLimit struct {
	mu                               sync.Mutex
	total, waiting                   int
	perPeer                          map[uint64]int
	maxTotal, maxPerPeer, maxWaiting int
	freed                            chan struct{} // closed, and replaced, when a place frees
	waits                            int           // times a stream found no place and waited: proves a wait
}

func newStreamLimit(total, perPeer, waiting int) *streamLimit {
	return &streamLimit{perPeer: map[uint64]int{}, maxTotal: total, maxPerPeer: perPeer, maxWaiting: waiting, freed: make(chan struct{})}
}

// errTooManyStreams: no place for another snapshot stream, even waiting.
var errTooManyStreams = errors.New("too many snapshot streams (MaxSnapshotStreams, MaxSnapshotStreamsPerPeer, MaxSnapshotStreamsWaiting)")

// enter counts a stream in among the waiting, or refuses it at once.
func (l *streamLimit) enter() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting >= l.maxWaiting {
		return errTooManyStreams
	}
	l.waiting++
	return nil
}

// await waits, until ctx ends, for a place for a stream that entered.
func (l *streamLimit) await(ctx context.Context, peer uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { l.waiting-- }()
	for l.total >= l.maxTotal || l.perPeer[peer] >= l.maxPerPeer {
		l.waits++
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			l.mu.Lock()
			return ctx.Err()
		}
		l.mu.Lock()
	}
	l.total++
	l.perPeer[peer]++
	return nil
}

// busy counts the streams under way.
func (l *streamLimit) busy() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// release frees a stream's place and wakes the waiting.
func (l *streamLimit) release(peer uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.perPeer[peer]--; l.perPeer[peer] == 0 {
		delete(l.perPeer, peer)
	}
	close(l.freed)
	l.freed = make(chan struct{})
}

// SendSnapshot streams a snapshot to a peer on a connection of its own,
// without blocking the caller; s.Done is told the outcome.
func (t *TCP) SendSnapshot(to uint64, s node.OutboundSnapshot) {
	// The MsgSnap is encoded here, on the caller's goroutine, which owns it.
	head, err := encodeFrames([]node.Envelope{s.Envelope}, t.cfg.MaxFrameSize, func(group uint64, n int) { t.traffic.add(group, to, n, true) })
	if err == nil && len(head) != 1 {
		err = errors.New("no frame")
	}
	var p *peer
	if err == nil {
		p, err = t.startStream(to)
	}
	if err != nil {
		t.Stats.SnapshotSendFailures.Add(1)
		s.Done(fmt.Errorf("transport: snapshot to %d: %w", to, err))
		return
	}
	go func() {
		defer t.wg.Done()
		err := t.outStreams.await(t.ctx, to)
		if err == nil {
			err = t.streamTo(p, head[0], s)
			t.outStreams.release(to)
		}
		if err != nil {
			t.Stats.SnapshotSendFailures.Add(1)
			t.log.Warn("transport: snapshot not sent", "to", to, "group", s.Envelope.Group, "err", err)
			err = fmt.Errorf("transport: snapshot to %d: %w", to, err)
		} else {
			t.Stats.SnapshotsSent.Add(1)
		}
		s.Done(err)
	}()
}

// startStream counts a stream to a peer in among those waiting for a
// place, and its goroutine in, unless the transport is closed.
func (t *TCP) startStream(to uint64) (*peer, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[to]
	switch {
	case p == nil:
		return nil, errors.New("no such peer")
	case t.ctx.Err() != nil:
		return nil, t.ctx.Err()
	}
	if err := t.outStreams.enter(); err != nil {
		return nil, err
	}
	t.wg.Add(1) // under mu with the context live: before Close's Wait
	return p, nil
}

// streamTo runs one snapshot stream as its sender.
func (t *TCP) streamTo(p *peer, head []byte, s node.OutboundSnapshot) error {
	c, err := t.dial(p, magicSnapshot)
	if err != nil {
		return err
	}
	defer t.untrack(c)
	ic := &idleConn{Conn: c, idle: t.cfg.SnapshotIdleTimeout}
	w := bufio.NewWriterSize(ic, t.cfg.SnapshotChunkSize)
	w.Write(head)
	w.Write(binary.BigEndian.AppendUint64(nil, s.Size))
	if err := w.Flush(); err != nil {
		return err
	}
	if err := expectAnswer(ic, answerGo); err != nil {
		return err
	}
	body := &bodyWriter{w: w, h: blake3.NewDeriveKey(sumContext), left: s.Size, ctx: t.ctx, pace: t.pace}
	if err := s.Write(body); err != nil {
		return fmt.Errorf("write the body: %w", err)
	}
	if body.left != 0 {
		return fmt.Errorf("the body ended %d bytes short of its %d", body.left, s.Size)
	}
	w.Write(body.h.Sum(nil))
	if err := w.Flush(); err != nil {
		return err
	}
	t.Stats.SnapshotBytesSent.Add(s.Size)
	return expectAnswer(ic, answerOK)
}

// idleConn fails a read or write that makes no progress for idle; with
// idle 0 it leaves the connection's deadlines alone.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Write(p []byte) (int, error) {
	if c.idle > 0 {
		c.SetWriteDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Write(p)
}

func (c *idleConn) Read(p []byte) (int, error) {
	if c.idle > 0 {
		c.SetReadDeadline(time.Now().Add(c.idle))
	}
	return c.Conn.Read(p)
}

func expectAnswer(r io.Reader, want string) error {
	got, err := readField(r, maxAnswer)
	if err != nil {
		return fmt.Errorf("waiting for the peer's answer: %w", err)
	}
	if string(got) != want {
		return fmt.Errorf("refused by the peer: %s", got)
	}
	return nil
}

// bodyWriter takes a body of a known size, summing it, and refuses more.
type bodyWriter struct {
	w    io.Writer
	h    *blake3.Hasher
	left uint64
	ctx  context.Context
	pace *pacer
}

func (b *bodyWriter) Write(p []byte) (int, error) {
	if uint64(len(p)) > b.left {
		return 0, fmt.Errorf("the body runs past its size (%d bytes more, %d left)", len(p), b.left)
	}
	if err := b.pace.wait(b.ctx, len(p)); err != nil {
		return 0, err
	}
	n, err := b.w.Write(p)
	b.h.Write(p[:n])
	b.left -= uint64(n)
	return n, err
}

// receiveSnapshot runs one snapshot stream as its receiver: it spools the
// body, checks it, hands the MsgSnap with it to the node and answers once
// the node stepped it. The stream's place is free again by the time the
// sender has the answer.
func (t *TCP) receiveSnapshot(from uint64, r *bufio.Reader, w io.Writer) {
	if err := t.takeSnapshot(from, r, w); err != nil {
		t.Stats.SnapshotRecvFailures.Add(1)
		t.log.Warn("transport: snapshot not taken", "from", from, "err", err)
		reason := []byte(err.Error())
		writeField(w, reason[:min(len(reason), maxAnswer)])
		return
	}
	t.Stats.SnapshotsReceived.Add(1)
	writeField(w, []byte(answerOK))
}

func (t *TCP) takeSnapshot(from uint64, r *bufio.Reader, w io.Writer) error {
	env, size, err := t.offered(from, r)
	if err != nil {
		return err
	}
	if err := t.awaitInbound(from); err != nil {
		return err
	}
	defer t.inStreams.release(from)
	if err := writeField(w, []byte(answerGo)); err != nil {
		return err
	}
	sp, err := t.spool(r, size)
	if err != nil {
		return err
	}
	t.Stats.SnapshotBytesReceived.Add(size)
	taken, err := t.handOver(env, sp)
	if err != nil {
		return err
	}
	t.log.Debug("transport: snapshot received", "from", from, "group", env.Group, "bytes", size, "taken", taken)
	return nil
}

// awaitInbound takes a place for a stream from a peer, waiting for one
// (the sender waits for the go-ahead) at most SnapshotIdleTimeout.
func (t *TCP) awaitInbound(from uint64) error {
	if err := t.inStreams.enter(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.SnapshotIdleTimeout)
	defer cancel()
	if err := t.inStreams.await(ctx, from); err != nil {
		return fmt.Errorf("no place for the stream: %w", err)
	}
	return nil
}

// offered reads and checks a stream's MsgSnap and body size.
func (t *TCP) offered(from uint64, r io.Reader) (node.Envelope, uint64, error) {
	batch, err := t.readBatch(from, r, nil)
	if err != nil {
		return node.Envelope{}, 0, err
	}
	var size [8]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return node.Envelope{}, 0, err
	}
	if len(batch) != 1 || batch[0].Msg.GetType() != pb.MessageType_MsgSnap {
		return node.Envelope{}, 0, errors.New("a snapshot stream opens with one MsgSnap")
	}
	env, n := batch[0], binary.BigEndian.Uint64(size[:])
	m, err := node.UnmarshalManifest(env.Msg.GetSnapshot().GetData())
	switch {
	case err != nil:
		return node.Envelope{}, 0, err
	case m.BodySize() != n:
		return node.Envelope{}, 0, fmt.Errorf("a body of %d bytes offered, its manifest says %d", n, m.BodySize())
	case n > t.cfg.MaxSnapshotSize:
		return node.Envelope{}, 0, fmt.Errorf("a body of %d bytes exceeds MaxSnapshotSize %d", n, t.cfg.MaxSnapshotSize)
	case t.cfg.SpoolDir == "":
		return node.Envelope{}, 0, errors.New("this node takes no snapshots (no SpoolDir)")
	}
	return env, n, nil
}

// spool copies a body of size bytes and its sum from r to a new spool
// file, a chunk at a time, and checks the sum; on any failure the file is
// gone.
func (t *TCP) spool(r io.Reader, size uint64) (sp *spooled, err error) {
	f, err := os.CreateTemp(t.cfg.SpoolDir, spoolPattern)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := blake3.NewDeriveKey(sumContext)
	buf := make([]byte, t.cfg.SnapshotChunkSize)
	if _, err := io.CopyBuffer(io.MultiWriter(f, h), io.LimitReader(r, int64(size)), buf); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	if fi, err := f.Stat(); err != nil || uint64(fi.Size()) != size {
		return nil, fmt.Errorf("spool: the body ended short of its %d bytes (%v)", size, err)
	}
	var sum [32]byte
	if _, err := io.ReadFull(r, sum[:]); err != nil {
		return nil, fmt.Errorf("spool: the body's sum: %w", err)
	}
	if !bytes.Equal(h.Sum(nil), sum[:]) {
		return nil, errors.New("spool: the body does not match its sum")
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return &spooled{f: f, h: blake3.NewDeriveKey(sumContext), sum: sum, left: int64(size)}, nil
}

// handOver gives the node the MsgSnap with its spooled body and waits,
// at most SnapshotIdleTimeout, for the node to step it. The node owns the
// body from then on; a body the node never got is removed here.
func (t *TCP) handOver(env node.Envelope, sp *spooled) (taken bool, err error) {
	stepped := make(chan bool, 1)
	env.Snapshot = &node.InboundSnapshot{Body: sp, Stepped: func(took bool) { stepped <- took }}
	idle := time.NewTimer(t.cfg.SnapshotIdleTimeout)
	defer idle.Stop()
	select {
	case t.inbox <- []node.Envelope{env}:
	case <-t.ctx.Done():
		sp.Close()
		return false, t.ctx.Err()
	case <-idle.C:
		sp.Close()
		return false, errors.New("the node did not take the snapshot in time")
	}
	select {
	case taken = <-stepped:
		return taken, nil
	case <-t.ctx.Done():
		return false, t.ctx.Err()
	case <-idle.C:
		return false, errors.New("the node did not step the snapshot in time")
	}
}

// spooled is a received body in its spool file. Read checks the sum again
// at the end, so a spool damaged on the disk is not restored from; Close
// removes the file.
type spooled struct {
	f      *os.File
	h      *blake3.Hasher
	sum    [32]byte
	left   int64
	closed bool
}

func (s *spooled) Read(p []byte) (int, error) {
	n, err := s.f.Read(p)
	s.h.Write(p[:n])
	s.left -= int64(n)
	if errors.Is(err, io.EOF) && (s.left != 0 || !bytes.Equal(s.h.Sum(nil), s.sum[:])) {
		return n, fmt.Errorf("snapshot spool %s: read back %d bytes off, or not matching its sum", s.f.Name(), s.left)
	}
	return n, err
}

func (s *spooled) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(s.f.Close(), os.Remove(s.f.Name()))
}
