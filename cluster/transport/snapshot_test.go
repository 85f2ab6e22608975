package transport

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/blake3"
	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

const testSecret = "the shared secret for c1"

// pair is a transport sending snapshots (node 1) and one receiving them
// (node 2, spooling under its own directory), tune applied to both.
func pair(t *testing.T, tune func(*Config)) (snd, rcv *TCP) {
	t.Helper()
	rc, sc := cfgFor(2, "c1", testSecret), cfgFor(1, "c1", testSecret)
	rc.SpoolDir = t.TempDir()
	if tune != nil {
		tune(&rc)
		tune(&sc)
	}
	rcv, err := Listen(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Close() })
	snd, err = Listen(sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { snd.Close() })
	snd.AddPeer(2, rcv.Addr())
	return snd, rcv
}

// snapEnvelope is a MsgSnap from 1 to 2 in group 2 whose manifest names a
// body of size bytes.
func snapEnvelope(size uint64) node.Envelope {
	m := node.Manifest{Inline: []byte("h"), Entries: []node.ManifestEntry{{Kind: "test", Name: "generated", Length: size}}}
	return node.Envelope{Group: 2, Msg: &pb.Message{
		Type: pb.MessageType_MsgSnap.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(uint64(3)),
		Snapshot: &pb.Snapshot{Data: m.Marshal(), Metadata: &pb.SnapshotMetadata{Index: new(uint64(10)), Term: new(uint64(3))}},
	}}
}

// generate writes size pseudo-random bytes in 64 KiB pieces from one
// buffer, summing them into sum; before the piece at pauseAt it calls
// pause (if set), and it fails with failWith at failAt (if set).
type generator struct {
	size, pauseAt, failAt uint64
	pause                 func()
	failWith              error
	sum                   []byte
}

func (g *generator) write(w io.Writer) error {
	rng := rand.NewChaCha8([32]byte{7})
	h := blake3.New()
	buf := make([]byte, 64<<10)
	for done := uint64(0); done < g.size; {
		if g.pause != nil && done >= g.pauseAt {
			g.pause()
			g.pause = nil
		}
		if g.failWith != nil && done >= g.failAt {
			return g.failWith
		}
		n := min(uint64(len(buf)), g.size-done)
		rng.Read(buf[:n])
		h.Write(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		done += n
	}
	g.sum = h.Sum(nil)
	return nil
}

// send starts a stream of g's body and returns where its outcome comes.
func send(snd *TCP, g *generator) <-chan error {
	done := make(chan error, 1)
	snd.SendSnapshot(2, node.OutboundSnapshot{Envelope: snapEnvelope(g.size), Size: g.size, Write: g.write, Done: func(err error) { done <- err }})
	return done
}

func outcome(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the stream's outcome never came")
		return nil
	}
}

// received waits for a snapshot in the inbox, passing heartbeats by.
func received(t *testing.T, rcv *TCP) node.Envelope {
	t.Helper()
	for {
		select {
		case b := <-rcv.Inbox():
			if b[0].Snapshot != nil {
				return b[0]
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no snapshot arrived")
		}
	}
}

func noSpools(t *testing.T, rcv *TCP) {
	t.Helper()
	waitFor(t, "no spool file left", func() bool { return len(spools(t, rcv.cfg.SpoolDir)) == 0 })
}

// TestSnapshotStreamsInBoundedMemory: a body far larger than the frame
// bound and the chunk streams to the peer and arrives byte for byte,
// while messages keep flowing beside it, and the two sides together
// allocate a small fraction of it.
func TestSnapshotStreamsInBoundedMemory(t *testing.T) {
	const size = 128 << 20
	snd, rcv := pair(t, nil)
	if size < 16*snd.cfg.MaxFrameSize || size < 64*snd.cfg.SnapshotChunkSize {
		t.Fatal("the body is not much larger than a frame and a chunk")
	}
	// Halfway, the stream waits until a heartbeat sent then has arrived:
	// messages do not queue behind a snapshot.
	var heartbeatSeen atomic.Bool
	g := &generator{size: size, pauseAt: size / 2, pause: func() {
		snd.Send(2, heartbeat(1, 2))
		for deadline := time.Now().Add(10 * time.Second); !heartbeatSeen.Load() && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}}
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	var peakHeap atomic.Uint64
	stop := sampleHeap(&peakHeap)
	start := time.Now()
	done := send(snd, g)

	var env node.Envelope
	for env.Snapshot == nil {
		select {
		case b := <-rcv.Inbox():
			if b[0].Msg.GetType() == pb.MessageType_MsgHeartbeat {
				heartbeatSeen.Store(true)
			}
			env = b[0]
		case <-time.After(20 * time.Second):
			t.Fatal("no snapshot arrived")
		}
	}
	h := blake3.New()
	n, err := io.CopyBuffer(h, env.Snapshot.Body, make([]byte, 64<<10))
	if err != nil || n != size {
		t.Fatalf("read %d of %d bytes of the body: %v", n, size, err)
	}
	env.Snapshot.Stepped(true)
	if err := outcome(t, done); err != nil {
		t.Fatalf("stream: %v", err)
	}
	elapsed := time.Since(start)
	stop()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if !heartbeatSeen.Load() {
		t.Fatal("a heartbeat sent during the stream did not arrive before it ended")
	}
	if !bytes.Equal(h.Sum(nil), g.sum) {
		t.Fatal("the body arrived different")
	}
	if err := env.Snapshot.Body.Close(); err != nil {
		t.Fatal(err)
	}
	noSpools(t, rcv)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d MiB streamed in %v (%.0f MB/s), allocated %.1f MiB in all, peak heap in use %.1f MiB",
		size>>20, elapsed.Round(time.Millisecond), float64(size)/1e6/elapsed.Seconds(), float64(alloc)/(1<<20), float64(peakHeap.Load())/(1<<20))
	if alloc > size/8 {
		t.Fatalf("sending and receiving %d MiB allocated %d MiB: the body is held, not streamed", size>>20, alloc>>20)
	}
	if snd.Stats.SnapshotsSent.Load() != 1 || rcv.Stats.SnapshotsReceived.Load() != 1 || rcv.Stats.SnapshotBytesReceived.Load() != size {
		t.Fatalf("stats: sent %d, received %d (%d bytes)", snd.Stats.SnapshotsSent.Load(), rcv.Stats.SnapshotsReceived.Load(), rcv.Stats.SnapshotBytesReceived.Load())
	}
}

// sampleHeap records the largest HeapInuse seen until stop is called.
func sampleHeap(peak *atomic.Uint64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		var ms runtime.MemStats
		for ctx.Err() == nil {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > peak.Load() {
				peak.Store(ms.HeapInuse)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return func() { cancel(); <-done }
}

// TestSnapshotStreamFailures: a stream that breaks is a failure on the
// sender's side, nothing reaches the node, and no spool is left.
func TestSnapshotStreamFailures(t *testing.T) {
	t.Run("sender fails midway", func(t *testing.T) {
		snd, rcv := pair(t, nil)
		g := &generator{size: 16 << 20, failAt: 8 << 20, failWith: errors.New("the log is shorter than its manifest says")}
		if err := outcome(t, send(snd, g)); err == nil || !strings.Contains(err.Error(), "shorter") {
			t.Fatalf("outcome: %v", err)
		}
		waitFor(t, "the receiver to count the failure", func() bool { return rcv.Stats.SnapshotRecvFailures.Load() == 1 })
		noSpools(t, rcv)
		expectNothing(t, rcv)
	})
	t.Run("receiver closes midway", func(t *testing.T) {
		snd, rcv := pair(t, nil)
		g := &generator{size: 16 << 20, pauseAt: 8 << 20, pause: func() { rcv.Close() }}
		if err := outcome(t, send(snd, g)); err == nil {
			t.Fatal("a stream to a closed peer succeeded")
		}
		noSpools(t, rcv)
		if snd.Stats.SnapshotSendFailures.Load() != 1 {
			t.Fatalf("%d send failures counted", snd.Stats.SnapshotSendFailures.Load())
		}
	})
	t.Run("wrong checksum", func(t *testing.T) {
		_, rcv := pair(t, nil)
		answer := rawStream(t, rcv, 1<<20, func(sum []byte) []byte { sum[0] ^= 1; return sum })
		if !strings.Contains(answer, "does not match its sum") {
			t.Fatalf("answer %q", answer)
		}
		noSpools(t, rcv)
		expectNothing(t, rcv)
	})
	t.Run("over MaxSnapshotSize", func(t *testing.T) {
		snd, rcv := pair(t, func(c *Config) { c.MaxSnapshotSize = 1 << 20 })
		if err := outcome(t, send(snd, &generator{size: 2 << 20})); err == nil || !strings.Contains(err.Error(), "MaxSnapshotSize") {
			t.Fatalf("outcome: %v", err)
		}
		noSpools(t, rcv)
		expectNothing(t, rcv)
	})
	t.Run("no answer from the node", func(t *testing.T) {
		snd, rcv := pair(t, func(c *Config) { c.SnapshotIdleTimeout = 200 * time.Millisecond })
		done := send(snd, &generator{size: 1 << 20})
		env := received(t, rcv) // and never stepped
		if err := outcome(t, done); err == nil {
			t.Fatal("a stream the node never stepped succeeded")
		}
		env.Snapshot.Body.Close()
		noSpools(t, rcv)
	})
}

// rawStream offers a snapshot body of size zero bytes the way a peer
// would, with its sum passed through alter, and returns the answer.
func rawStream(t *testing.T, rcv *TCP, size uint64, alter func([]byte) []byte) string {
	t.Helper()
	cli, err := Listen(cfgFor(1, "c1", testSecret), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c, err := cli.dial(&peer{id: 2, addr: rcv.Addr()}, magicSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.untrack(c)
	head, _ := encodeFrames([]node.Envelope{snapEnvelope(size)}, DefaultMaxFrameSize, nil)
	c.Write(append(head[0], binary.BigEndian.AppendUint64(nil, size)...))
	if err := expectAnswer(c, answerGo); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, size)
	h := blake3.NewDeriveKey(sumContext)
	h.Write(body)
	c.Write(body)
	c.Write(alter(h.Sum(nil)))
	answer, err := readField(c, 256)
	if err != nil {
		t.Fatal(err)
	}
	return string(answer)
}

// waited counts the times a stream found no place and waited for one.
func (l *streamLimit) waited() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waits
}

// expectNothing checks that the inbox is empty. Call it only once an
// event proves the receiver is done with the stream (its failure counted,
// its answer read, the peer refused): the inbox then holds all the stream
// ever put there, so an empty one shows nothing reached the node.
func expectNothing(t *testing.T, rcv *TCP) {
	t.Helper()
	select {
	case b := <-rcv.Inbox():
		t.Fatalf("a failed stream reached the node: %v", b)
	default:
	}
}

// TestSnapshotFromAnotherSecretIsRefused: a snapshot stream authenticates
// like the messages: a peer with another secret gets no stream.
func TestSnapshotFromAnotherSecretIsRefused(t *testing.T) {
	rc := cfgFor(2, "c1", testSecret)
	rc.SpoolDir = t.TempDir()
	rcv, err := Listen(rc, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rcv.Close()
	snd, err := Listen(cfgFor(1, "c1", "another secret, also long"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	snd.AddPeer(2, rcv.Addr())
	if err := outcome(t, send(snd, &generator{size: 1 << 20})); err == nil {
		t.Fatal("a stream with another secret succeeded")
	}
	waitFor(t, "the receiver to refuse the peer", func() bool { return rcv.Stats.RefusedPeers.Load() > 0 })
	noSpools(t, rcv)
	expectNothing(t, rcv)
}

// TestSnapshotStreamsAreBounded: past MaxSnapshotStreamsPerPeer a stream
// waits for a place, and starts when one frees; past
// MaxSnapshotStreamsWaiting one is refused at once.
func TestSnapshotStreamsAreBounded(t *testing.T) {
	snd, rcv := pair(t, func(c *Config) { c.MaxSnapshotStreamsPerPeer, c.MaxSnapshotStreamsWaiting = 1, 1 })
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // a failing test ends instead of waiting on the first stream
	first := send(snd, &generator{size: 1 << 20, pauseAt: 1 << 19, pause: func() { <-release }})
	waitFor(t, "the first stream under way", func() bool { return rcv.inStreams.busy() == 1 })
	var secondStarted atomic.Bool
	second := &generator{size: 1 << 20, pause: func() { secondStarted.Store(true) }}
	secondDone := send(snd, second)
	if err := outcome(t, send(snd, &generator{size: 1 << 20})); !errors.Is(err, errTooManyStreams) {
		t.Fatalf("a third stream with one under way and one waiting: %v", err)
	}
	// The second stream found no place and waited for one: only a place
	// freed wakes it, and the first holds its place until release.
	waitFor(t, "the second stream to wait for a place", func() bool { return snd.outStreams.waited() > 0 || secondStarted.Load() })
	if secondStarted.Load() {
		t.Fatal("a second stream to the peer started beside the first")
	}
	free()
	received(t, rcv).Snapshot.Stepped(true)
	if err := outcome(t, first); err != nil {
		t.Fatal(err)
	}
	received(t, rcv).Snapshot.Stepped(false)
	if err := outcome(t, secondDone); err != nil || !secondStarted.Load() {
		t.Fatalf("the waiting stream, once a place freed: %v", err)
	}
}

// TestListenRemovesLeftoverSpools: spools a crash left are removed at
// start, and nothing else in the directory is touched.
func TestListenRemovesLeftoverSpools(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snapshots")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"snapshot-123.spool", "keep.txt"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := cfgFor(1, "c1", testSecret)
	cfg.SpoolDir = dir
	tr, err := Listen(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if left := spools(t, dir); len(left) != 1 || left[0] != "keep.txt" {
		t.Fatalf("left in the spool directory: %v", left)
	}
	fresh := filepath.Join(t.TempDir(), "new")
	cfg.SpoolDir = fresh
	tr2, err := Listen(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spool directory created as %v: %v", fi.Mode(), err)
	}
}
