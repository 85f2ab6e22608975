package transport

import (
	"encoding/binary"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"tally/cluster/node"
)

// encodeFrames packs a batch into frames of at most max bytes: each a
// 4-byte length, then per message its group (uvarint), its length
// (uvarint) and its bytes. A message that fits no frame is left out and
// named in the error; the others still go. sent, when given, is told each
// message's group and encoded size.
func encodeFrames(batch []node.Envelope, max int, sent func(group uint64, n int)) ([][]byte, error) {
	var frames [][]byte
	var errs []error
	buf := make([]byte, 4, 256)
	for _, e := range batch {
		data, err := proto.Marshal(e.Msg)
		if err != nil {
			errs = append(errs, fmt.Errorf("marshal: %w", err))
			continue
		}
		msg := binary.AppendUvarint(nil, e.Group)
		msg = binary.AppendUvarint(msg, uint64(len(data)))
		msg = append(msg, data...)
		if len(msg) > max {
			errs = append(errs, fmt.Errorf("a %s of %d bytes exceeds MaxFrameSize %d", e.Msg.GetType(), len(msg), max))
			continue
		}
		if len(buf)-4+len(msg) > max {
			frames = append(frames, sealFrame(buf))
			buf = make([]byte, 4, 256)
		}
		buf = append(buf, msg...)
		if sent != nil {
			sent(e.Group, len(data))
		}
	}
	if len(buf) > 4 {
		frames = append(frames, sealFrame(buf))
	}
	return frames, errors.Join(errs...)
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
