package api

import "testing"

// BenchmarkDecodeDeclare is the decoder on the commonest write's body.
func BenchmarkDecodeDeclare(b *testing.B) {
	body := []byte(`{"id":"desk/ship-91","promise":"hand back a reviewed schema","by":"https://example.org/agents/reviewer","to":"https://example.org/agents/author","until":"2026-09-01T17:00:00Z","meta":{"k":1}}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var d PromiseDeclare
		if err := Decode("body", body, &d); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeClaimCreate is the decoder on a document encoding/json
// decodes (nested slots).
func BenchmarkDecodeClaimCreate(b *testing.B) {
	body := []byte(`{"claim":"C17","respondent":"parser","work":"reject incomplete Unicode escapes","slots":[{"name":"change","checks":[{"id":"behavior","validator":{"name":"command","version":"1"}}]}]}`)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var d ClaimCreate
		if err := Decode("body", body, &d); err != nil {
			b.Fatal(err)
		}
	}
}
