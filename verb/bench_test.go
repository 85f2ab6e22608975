package verb

import (
	"context"
	"testing"

	"tally/api"
	"tally/service"
)

// amendOnly is a Service whose AmendPromise answers at once.
type amendOnly struct{ service.Service }

func (amendOnly) AmendPromise(context.Context, service.Call, api.PromiseAmend) (service.PromiseWritten, error) {
	return service.PromiseWritten{Doc: service.Doc{JSON: []byte("{}")}}, nil
}

// BenchmarkCall is what the table adds to a call: the dispatch from an
// Input to the Service method and the Doc read from its result.
func BenchmarkCall(b *testing.B) {
	v, svc, d := Of(PromiseAmend), amendOnly{}, api.PromiseAmend{ID: "p1", Until: "3h"}
	ctx := context.Background()
	b.Run("table", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := v.Call(ctx, svc, service.Call{}, Input{Doc: &d}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := svc.AmendPromise(ctx, service.Call{}, d); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkTable is the cost of a fresh table.
func BenchmarkTable(b *testing.B) {
	b.ReportAllocs()
	for range b.N {
		if len(Table()) == 0 {
			b.Fatal("no verbs")
		}
	}
}
