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

// FuzzDecodePlainAgreesWithJSON: whatever the reflection-free decoder of a
// command takes, encoding/json reads the same (it decoded every entry
// before, and still decodes what the other leaves to it).
func FuzzDecodePlainAgreesWithJSON(f *testing.F) {
	plain, _ := Command{Method: "DeclarePromise", Tenant: "acme", Session: "main", Actor: "alice", Person: true, RequestID: "r1", TS: 1, Seed: 2, Doc: json.RawMessage(`{"promise":"p <&> é"}`)}.Encode()
	f.Add(plain)
	f.Add([]byte(`{"m":"x","t":"a\u00e9","s":"s","ts":-3,"d":{}}`))
	f.Add([]byte(`{"m":"x","M":"y","ts":1}`))
	f.Add([]byte(`{"m":"x","ts":1e3}`))
	f.Add([]byte(`{"m":"x","p":null,"d":null}`))
	f.Add([]byte(` {"seed":18446744073709551615,"m":"a","m":"b"} `))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, ok := decodePlain(data)
		if !ok {
			return
		}
		var ref Command
		if err := json.Unmarshal(data, &ref); err != nil {
			t.Fatalf("%q decoded plain to %+v, which encoding/json refuses: %v", data, c, err)
		}
		if c.Method != ref.Method || c.Tenant != ref.Tenant || c.Session != ref.Session || c.Actor != ref.Actor || c.Person != ref.Person ||
			c.RequestID != ref.RequestID || c.TS != ref.TS || c.Seed != ref.Seed || !bytes.Equal(c.Doc, ref.Doc) {
			t.Fatalf("%q decoded plain to %+v, by encoding/json to %+v", data, c, ref)
		}
	})
}

// BenchmarkDecodeCommand decodes a declaration's entry as a replica's
// apply does.
func BenchmarkDecodeCommand(b *testing.B) {
	enc, _ := Command{Method: "DeclarePromise", Tenant: "acme", Session: "main", Actor: "alice", RequestID: "req-1", TS: 1765000000000000000, Seed: 1234567890123,
		Doc: json.RawMessage(`{"promise":"ship the release notes","to":"bob","until":"2h"}`)}.Encode()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := DecodeCommand(enc); err != nil {
			b.Fatal(err)
		}
	}
}
