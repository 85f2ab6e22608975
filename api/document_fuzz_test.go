package api

import (
	"bytes"
	"testing"
	"time"

	"tally/promise"
)

// FuzzDecodeView feeds arbitrary bytes to the client's view decoder (what a
// remote CLI reads from a server): no panic, and a view that decodes prints
// back to bytes that decode to the same view.
func FuzzDecodeView(f *testing.F) {
	at := time.Date(2026, 9, 1, 17, 0, 0, 0, time.UTC)
	v := promise.View{ID: "desk/ship-91", Promise: "p", By: "a", To: "b", On: "x", Until: at, Horizons: []time.Time{at},
		State: promise.Owed, Declared: at, Seq: 3, Meta: `{"k":1}`,
		Assessments: []promise.AssessmentView{{Observer: "o", State: "violated", Note: "n", TS: at}}}
	f.Add(v.AppendJSON(nil))
	f.Add([]byte(`{"id":"x","horizons":[],"meta":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeView(b)
		if err != nil {
			return
		}
		once := v.AppendJSON(nil)
		w, err := DecodeView(once)
		if err != nil {
			t.Fatalf("a printed view does not decode: %v\n%s", err, once)
		}
		if twice := w.AppendJSON(nil); !bytes.Equal(once, twice) {
			t.Fatalf("view does not round-trip:\n%s\n%s", once, twice)
		}
	})
}
