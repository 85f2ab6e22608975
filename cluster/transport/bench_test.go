package transport

import (
	"bytes"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"

	"tally/cluster/node"
)

// BenchmarkFrames encodes a leader's batch to one follower (an append of 16
// entries of a 300-byte command, and a heartbeat) into frames and decodes
// it back, as the two ends of a connection do. Per op: one batch.
func BenchmarkFrames(b *testing.B) {
	data := make([]byte, 300)
	ents := make([]*pb.Entry, 16)
	for i := range ents {
		ents[i] = &pb.Entry{Index: new(uint64(100 + i)), Term: new(uint64(3)), Type: new(pb.EntryType_EntryNormal), Data: data}
	}
	app := &pb.Message{Type: new(pb.MessageType_MsgApp), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3)),
		LogTerm: new(uint64(3)), Index: new(uint64(99)), Commit: new(uint64(99)), Entries: ents}
	hb := &pb.Message{Type: new(pb.MessageType_MsgHeartbeat), To: new(uint64(2)), From: new(uint64(1)), Term: new(uint64(3)), Commit: new(uint64(99))}
	batch := []node.Envelope{{Group: 2, Msg: app}, {Group: 1, Msg: hb}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		frames, err := encodeFrames(batch, 4<<20, nil)
		if err != nil || len(frames) != 1 {
			b.Fatalf("frames %d, %v", len(frames), err)
		}
		got, err := decodeBatch(frames[0][4:])
		if err != nil || len(got) != 2 {
			b.Fatalf("decoded %d, %v", len(got), err)
		}
	}
}

// TestReadBatchReusesItsBufferSafely reads two frames into one scratch
// buffer: the first batch's entries must keep their bytes once the second
// frame overwrote the buffer (decoding copies them out).
func TestReadBatchReusesItsBufferSafely(t *testing.T) {
	msg := func(data string) []node.Envelope {
		e := &pb.Entry{Index: new(uint64(1)), Term: new(uint64(1)), Data: []byte(data)}
		return []node.Envelope{{Group: 2, Msg: &pb.Message{Type: new(pb.MessageType_MsgApp), From: new(uint64(1)), To: new(uint64(2)), Entries: []*pb.Entry{e}}}}
	}
	var wire bytes.Buffer
	for _, d := range []string{"first entry", "SECOND ENTRY"} {
		frames, err := encodeFrames(msg(d), DefaultMaxFrameSize, nil)
		if err != nil {
			t.Fatal(err)
		}
		wire.Write(frames[0])
	}
	tr := &TCP{cfg: DefaultConfig()}
	var scratch []byte
	first, err := tr.readBatch(1, &wire, &scratch)
	if err != nil {
		t.Fatal(err)
	}
	second, err := tr.readBatch(1, &wire, &scratch)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{string(first[0].Msg.GetEntries()[0].GetData()), string(second[0].Msg.GetEntries()[0].GetData())}
	if got[0] != "first entry" || got[1] != "SECOND ENTRY" {
		t.Fatalf("entries read %q, want [first entry SECOND ENTRY]", got)
	}
}
