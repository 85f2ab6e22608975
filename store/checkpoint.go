package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// A checkpoint is a cache of the folded state at some Position, so opening a
// session costs O(lines since the checkpoint). Deleting it loses nothing. Its
// file is: magic, the Position, the caller's payload, and a 32-byte trailer
// (CRC-32C and length of all of that); a checkpoint whose sum, or whose Position, does not match is
// ignored.
const checkpointMagic = "TALLYCK2"

// checkpointContext marks the sum's layout. Do not change.
const checkpointContext = "tally ckpt v2"

// ErrNoCheckpoint means there is no usable checkpoint; fold from the start.
var ErrNoCheckpoint = errors.New("no usable checkpoint")

// WriteCheckpoint stores payload as the state at pos. It writes a temporary
// file and renames it over the old one, so a reader sees one or the other.
// A checkpoint torn by a crash fails its sum and is ignored, which costs a
// fold and loses nothing; the file is fsynced anyway, so that its data is not
// left for the log's next fsync to write out.
func (l *Log) WriteCheckpoint(pos Position, payload []byte) error {
	// Header, payload and trailer are written as they are: the payload (tens
	// of megabytes for a large ledger) is neither copied nor reallocated.
	head := make([]byte, 0, len(checkpointMagic)+8+8+32+8)
	head = append(head, checkpointMagic...)
	head = binary.LittleEndian.AppendUint64(head, uint64(pos.Offset))
	head = binary.LittleEndian.AppendUint64(head, pos.Seq)
	head = append(head, pos.Hash[:]...)
	head = binary.LittleEndian.AppendUint64(head, uint64(len(payload)))
	sum := checkpointSumParts(head, payload)

	tmp, err := os.CreateTemp(l.dir, checkpointName+".tmp*")
	if err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := writeOutChunked(tmp, head, payload, sum[:]); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	// Flush the file here, where it costs only this (background) writer:
	// left dirty, the file system's next journal commit — the log's next
	// fsync — would have to write it out first.
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(l.dir, checkpointName)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// checkpointSum detects a torn or damaged cache file. CRC-32C (in
// hardware) is enough for that and keeps opening a large ledger cheap; the
// checkpoint is trusted no further than its match with the hash-chained log.
func checkpointSum(b []byte) (sum [32]byte) { return checkpointSumParts(b, nil) }

// checkpointSumParts is checkpointSum of a and b concatenated.
func checkpointSumParts(a, b []byte) (sum [32]byte) {
	crc := crc32.Update(crc32.Checksum(a, castagnoli), castagnoli, b)
	binary.LittleEndian.PutUint32(sum[:], crc)
	binary.LittleEndian.PutUint64(sum[4:], uint64(len(a)+len(b)))
	copy(sum[12:], checkpointContext)
	return sum
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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
	b, err := os.ReadFile(filepath.Join(l.dir, checkpointName))
	if errors.Is(err, os.ErrNotExist) {
		return Position{}, nil, nil, ErrNoCheckpoint
	}
	if err != nil {
		return Position{}, nil, nil, fmt.Errorf("%w: %v", ErrNoCheckpoint, err)
	}
	const head = len(checkpointMagic) + 8 + 8 + 32 + 8
	if len(b) < head+32 || string(b[:len(checkpointMagic)]) != checkpointMagic {
		return Position{}, nil, nil, fmt.Errorf("%w: not a %s checkpoint", ErrNoCheckpoint, checkpointMagic)
	}
	body, sum := b[:len(b)-32], b[len(b)-32:]
	summed := make(chan error, 1)
	go func() {
		if want := checkpointSum(body); !bytes.Equal(want[:], sum) {
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
	n := binary.LittleEndian.Uint64(b[i+48:])
	if uint64(len(body)-head) != n {
		verify()
		return Position{}, nil, nil, fmt.Errorf("%w: payload length mismatch", ErrNoCheckpoint)
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
	size := int64(4096)
	for {
		if size > pos.Offset {
			size = pos.Offset
		}
		buf := make([]byte, size)
		if _, err := l.file.ReadAt(buf, pos.Offset-size); err != nil {
			return fmt.Errorf("log shorter than the checkpoint: %v", err)
		}
		if buf[len(buf)-1] != '\n' {
			return errors.New("checkpoint offset is not a line end")
		}
		start := bytes.LastIndexByte(buf[:len(buf)-1], '\n') + 1
		if start == 0 && size < pos.Offset && size < LineMax {
			size *= 4
			continue
		}
		env, _, err := parseEnvelope(buf[start : len(buf)-1])
		if err != nil {
			return err
		}
		if env.Seq != pos.Seq || env.Hash != pos.Hash {
			return errors.New("log at the checkpoint's offset holds another line")
		}
		return nil
	}
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

// writeOutChunked writes parts to f and has the kernel write each chunk
// out to the disk, waiting for it, before the next. A log fsync during a
// checkpoint then waits for one chunk at most: its journal commit must write
// out any data of this file still in memory, and a whole checkpoint (tens of
// megabytes for a large ledger) held every writer for as long as that took.
// Where the file system cannot do it, the final fsync does it all.
func writeOutChunked(f *os.File, parts ...[]byte) error {
	var off, flushed int64
	flush := func(force bool) {
		if off-flushed >= checkpointChunk || (force && off > flushed) {
			_ = unix.SyncFileRange(int(f.Fd()), flushed, off-flushed,
				unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
			flushed = off
		}
	}
	for _, part := range parts {
		for len(part) > 0 {
			n := min(len(part), checkpointChunk-int(off-flushed))
			if _, err := f.Write(part[:n]); err != nil {
				return err
			}
			off += int64(n)
			part = part[n:]
			flush(false)
		}
	}
	flush(true)
	return nil
}
