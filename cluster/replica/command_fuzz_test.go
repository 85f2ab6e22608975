package replica

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzDecodeCommand feeds arbitrary bytes as a committed entry: never a
// panic, and a command that decodes encodes to an entry that decodes to
// the same command (its payload, the bytes of a chunk, whole).
func FuzzDecodeCommand(f *testing.F) {
	plain, _ := Command{Method: "DeclarePromise", Tenant: "acme", Session: "main", Actor: "alice", TS: 1, Seed: 2, Doc: json.RawMessage(`{"promise":"p"}`)}.Encode()
	staged, _ := Command{Method: MethodStage, Tenant: "acme", Session: "main", TS: 3, Doc: json.RawMessage(`{"upload":"u","offset":0}`), Payload: []byte("bytes")}.Encode()
	f.Add(plain)
	f.Add(staged)
	f.Add([]byte{payloadFrame, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := DecodeCommand(data)
		if err != nil {
			return
		}
		enc, err := c.Encode()
		if err != nil {
			return // a document json.Marshal will not write again (it was not valid for it)
		}
		again, err := DecodeCommand(enc)
		if err != nil {
			t.Fatalf("%q decoded to %+v, whose encoding %q does not decode: %v", data, c, enc, err)
		}
		if again.Method != c.Method || again.Tenant != c.Tenant || again.Session != c.Session || again.TS != c.TS ||
			again.Seed != c.Seed || !bytes.Equal(again.Payload, c.Payload) {
			t.Fatalf("round trip changed %+v into %+v", c, again)
		}
	})
}

// FuzzDecideMeta feeds arbitrary meta commands to the meta group's rule:
// never a panic, the state given is not changed in place, and the same
// command decides the same.
func FuzzDecideMeta(f *testing.F) {
	f.Add([]byte(`{"op":"member.add","member":{"id":2,"raft_addr":"a:1","addr":"a:2"}}`))
	f.Add([]byte(`{"op":"token.revoke","token_id":"tok_1"}`))
	f.Add([]byte(`{"op":"member.remove","id":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c MetaCommand
		if json.Unmarshal(data, &c) != nil {
			return
		}
		st := metaState{Members: []Member{{ID: 1, RaftAddr: "n1:1", Addr: "n1:2"}}}
		before, _ := json.Marshal(st)
		a, outA := decideMeta(st, c, 8)
		b, outB := decideMeta(st, c, 8)
		after, _ := json.Marshal(st)
		if !bytes.Equal(before, after) {
			t.Fatalf("deciding %s changed the state given", data)
		}
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if !bytes.Equal(ja, jb) || (outA.Err == nil) != (outB.Err == nil) {
			t.Fatalf("%s decided two ways", data)
		}
	})
}
