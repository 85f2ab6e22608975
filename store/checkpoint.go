package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A checkpoint is a cache of the folded state at some Position, so opening a
// session costs O(lines since the checkpoint). Deleting it loses nothing. Its
// file is: magic, the Position, the caller's payload, and a 32-byte trailer
// (CRC-32C and length of all of that); a checkpoint whose sum, or whose
// Position, does not match is ignored.
//
// Version 3 is written as the payload is encoded, a chunk at a time, so a
// large state is never held twice in memory; version 2, which also held the
// payload's length ahead of it, is still read.
const (
	checkpointMagic   = "TALLYCK3"
	checkpointMagicV2 = "TALLYCK2"
)

// checkpointContext marks the sum's layout, by version. Do not change.
const (
	checkpointContext   = "tally ckpt v3"
	checkpointContextV2 = "tally ckpt v2"
)

// checkpointHead is the size of a version 3 head: magic, offset, seq, hash.
const checkpointHead = len(checkpointMagic) + 8 + 8 + 32

// ErrNoCheckpoint means there is no usable checkpoint; fold from the start.
var ErrNoCheckpoint = errors.New("no usable checkpoint")

// WriteCheckpoint stores payload as the state at pos.
func (l *Log) WriteCheckpoint(pos Position, payload []byte) error {
	_, err := l.WriteCheckpointFrom(pos, func(emit func([]byte) error) error { return emit(payload) })
	return err
}

// WriteCheckpointFrom stores as the state at pos the payload that encode
// passes to emit, in as many pieces as it likes, and returns its length.
// The file is written as the pieces come, and written out to the disk
// 256 KiB at a time (see checkpointWriter); then it is fsynced and renamed
// over the old one, so a reader sees one or the other. A checkpoint torn by
// a crash fails its sum and is ignored, which costs a fold and loses
// nothing; the file is fsynced anyway, so that its data is not left for the
// log's next fsync to write out. If encode fails, nothing replaces the old
// checkpoint.
func (l *Log) WriteCheckpointFrom(pos Position, encode func(emit func([]byte) error) error) (int64, error) {
	tmp, err := os.CreateTemp(l.dir, checkpointName+".tmp*")
	if err != nil {
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	fail := func(err error) (int64, error) {
		tmp.Close()
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	w := &checkpointWriter{f: tmp}
	head := make([]byte, 0, checkpointHead)
	head = append(head, checkpointMagic...)
	head = binary.LittleEndian.AppendUint64(head, uint64(pos.Offset))
	head = binary.LittleEndian.AppendUint64(head, pos.Seq)
	head = append(head, pos.Hash[:]...)
	if err := w.write(head); err != nil {
		return fail(err)
	}
	if err := encode(w.write); err != nil {
		return fail(err)
	}
	n := w.off - int64(checkpointHead)
	sum := checkpointTrailer(w.crc, w.off, checkpointContext)
	if err := w.write(sum[:]); err != nil {
		return fail(err)
	}
	w.flush(true)
	// Flush the file here, where it costs only this (background) writer:
	// left dirty, the file system's next journal commit — the log's next
	// fsync — would have to write it out first.
	if err := tmp.Sync(); err != nil {
		return fail(err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(l.dir, checkpointName)); err != nil {
		os.Remove(tmp.Name())
		return 0, fmt.Errorf("write checkpoint: %w", err)
	}
	return n, nil
}

// checkpointTrailer is the 32-byte trailer of a checkpoint whose bytes
// before it have CRC-32C crc and length n: the sum, the length and the
// version's context. CRC-32C (in hardware) is enough to detect a torn or
// damaged cache file and keeps opening a large ledger cheap; the checkpoint
// is trusted no further than its match with the hash-chained log.
func checkpointTrailer(crc uint32, n int64, context string) (sum [32]byte) {
	binary.LittleEndian.PutUint32(sum[:], crc)
	binary.LittleEndian.PutUint64(sum[4:], uint64(n))
	copy(sum[12:], context)
	return sum
}

// castagnoli is the CRC-32C table; hash/crc32 makes it once, on first use,
// not at every process's start.
func castagnoli() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) }

// ReadCheckpoint returns the checkpoint's position and payload if the file
// is whole and the log still holds, at that position, the line the
// checkpoint was taken after. Anything else is ErrNoCheckpoint (wrapped with
// the reason).
func (l *Log) ReadCheckpoint() (Position, []byte, error) {
	pos, payload, verify, err := l.ReadCheckpointAsync()
	if err != nil {
		return pos, nil, err
	}
	if err := verify(); err != nil {
		return Position{}, nil, err
	}
	return pos, payload, nil
}

// ReadCheckpointAsync is ReadCheckpoint with the checksum computed
// concurrently, so a caller can decode the payload meanwhile: verify waits
// for it and must return nil before anything decoded is trusted.
func (l *Log) ReadCheckpointAsync() (Position, []byte, func() error, error) {
	b, err := readWhole(filepath.Join(l.dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, nil, nil, ErrNoCheckpoint
	}
	if err != nil {
		return Position{}, nil, nil, fmt.Errorf("%w: %v", ErrNoCheckpoint, err)
	}
	// Version 2 has the payload's length after the position.
	head, context := checkpointHead, checkpointContext
	if len(b) >= len(checkpointMagicV2) && string(b[:len(checkpointMagicV2)]) == checkpointMagicV2 {
		head, context = checkpointHead+8, checkpointContextV2
	} else if len(b) < len(checkpointMagic) || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return Position{}, nil, nil, fmt.Errorf("%w: not a %s checkpoint", ErrNoCheckpoint, checkpointMagic)
	}
	if len(b) < head+32 {
		return Position{}, nil, nil, fmt.Errorf("%w: truncated", ErrNoCheckpoint)
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	summed := make(chan error, 1)
	go func() {
		want := checkpointTrailer(crc32.Checksum(body, castagnoli()), int64(len(body)), context)
		if !bytes.Equal(want[:], sum) {
			summed <- fmt.Errorf("%w: checksum mismatch", ErrNoCheckpoint)
			return
		}
		summed <- nil
	}()
	verify := func() error { return <-summed }
	var pos Position
	i := len(checkpointMagic)
	pos.Offset = int64(binary.LittleEndian.Uint64(b[i:]))
	pos.Seq = binary.LittleEndian.Uint64(b[i+8:])
	copy(pos.Hash[:], b[i+16:i+48])
	if head > checkpointHead {
		if n := binary.LittleEndian.Uint64(b[i+48:]); uint64(len(body)-head) != n {
			verify()
			return Position{}, nil, nil, fmt.Errorf("%w: payload length mismatch", ErrNoCheckpoint)
		}
	}
	if err := l.lineEndsAt(pos); err != nil {
		verify()
		return Position{}, nil, nil, fmt.Errorf("%w: %v", ErrNoCheckpoint, err)
	}
	return pos, body[head:], verify, nil
}

// lineEndsAt checks that the log's line ending at pos.Offset carries pos's
// sequence and hash, in O(1) reads.
func (l *Log) lineEndsAt(pos Position) error {
	if pos.Seq == 0 {
		if pos.Offset != 0 {
			return errors.New("empty position with an offset")
		}
		return nil
	}
	if pos.Offset <= 0 {
		// Damage: the sum is checked meanwhile, and this must not read
		// with a size it made up.
		return errors.New("a line that ends at or before the log's start")
	}
	last, err := lastLine(l.file, pos.Offset, l.Path())
	switch {
	case err != nil:
		return fmt.Errorf("the line at the checkpoint's offset: %w", err)
	case last.Offset != pos.Offset:
		return errors.New("checkpoint offset is not a line end")
	case last.Seq != pos.Seq || last.Hash != pos.Hash:
		return errors.New("log at the checkpoint's offset holds another line")
	}
	return nil
}

// RemoveCheckpoint deletes the checkpoint, if any.
func (l *Log) RemoveCheckpoint() error {
	err := os.Remove(filepath.Join(l.dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// checkpointChunk is how much of a checkpoint is written out at a time.
const checkpointChunk = 256 << 10

// checkpointWriter writes a checkpoint file as it is encoded, summing it,
// and has the kernel write each chunk out to the disk, waiting for it,
// before the next. A log fsync during a checkpoint then waits for one chunk
// at most: its journal commit must write out any data of this file still in
// memory, and a whole checkpoint (tens of megabytes for a large ledger) held
// every writer for as long as that took. Where the file system cannot do
// it, the final fsync does it all.
type checkpointWriter struct {
	f            *os.File
	off, flushed int64
	crc          uint32
}

func (w *checkpointWriter) write(b []byte) error {
	for len(b) > 0 {
		piece := b[:min(len(b), checkpointChunk-int(w.off-w.flushed))]
		if _, err := w.f.Write(piece); err != nil {
			return err
		}
		w.crc = crc32.Update(w.crc, castagnoli(), piece)
		w.off += int64(len(piece))
		w.flush(false)
		b = b[len(piece):]
	}
	return nil
}

func (w *checkpointWriter) flush(force bool) {
	if w.off-w.flushed >= checkpointChunk || (force && w.off > w.flushed) {
		_ = unix.SyncFileRange(int(w.f.Fd()), w.flushed, w.off-w.flushed,
			unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
		w.flushed = w.off
	}
}

// readWhole reads a file into fresh memory that the kernel is asked to back
// with huge pages. A checkpoint is read whole and kept (the state's strings
// share its bytes): tens of megabytes for a large ledger, and faulting them
// in 4 KiB at a time cost more than decoding them where page faults are
// slow (≈ 15 µs each on a virtual machine: 0.27 s for 74 MB). The advice is
// only that: where it is refused, the read is as before.
func readWhole(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size())
	if len(b) >= 4<<20 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}
