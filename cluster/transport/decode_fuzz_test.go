package transport

import (
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

// FuzzDecodeBatch feeds arbitrary bytes as a frame from a peer: never a
// panic, and a batch that decodes holds messages.
func FuzzDecodeBatch(f *testing.F) {
	frames, _ := encodeFrames([]node.Envelope{{Group: 2, Msg: &pb.Message{Type: pb.MessageType_MsgHeartbeat.Enum(), To: new(uint64(2)), From: new(uint64(1))}}}, 1<<20, nil)
	for _, fr := range frames {
		f.Add(fr[4:])
	}
	f.Add([]byte{0x02, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		envs, err := decodeBatch(data)
		if err != nil {
			return
		}
		for _, e := range envs {
			if e.Msg == nil {
				t.Fatalf("%q decoded to an envelope without a message", data)
			}
		}
	})
}
