package mcp_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"tally/api"
	"tally/rest"
	"tally/service"
)

// unknownAt is the Service of a cluster node whose write's outcome is
// unknown: its first `lost` declarations commit but are answered 503
// UnknownOutcome, naming the request id the call carried.
type unknownAt struct {
	service.Service
	mu   sync.Mutex
	lost int
	ids  []string
}

type unknown struct{ ref *rest.Refusal }

func (u unknown) Error() string          { return u.ref.Message }
func (u unknown) Refusal() *rest.Refusal { return u.ref }

func (u *unknownAt) DeclarePromise(ctx context.Context, c service.Call, d api.PromiseDeclare) (service.PromiseWritten, error) {
	res, err := u.Service.DeclarePromise(ctx, c, d)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.ids = append(u.ids, c.RequestID)
	if err != nil || len(u.ids) > u.lost {
		return res, err
	}
	var ms []api.Member
	if c.RequestID != "" {
		ms = append(ms, api.M("request_id", api.S(c.RequestID)))
	}
	return service.PromiseWritten{}, unknown{rest.NewRetryable(service.CodeUnknownOutcome,
		"group 2 did not answer the write at this node: node: timed out waiting for the group; "+service.RetryAdvice(c.RequestID), ms...)}
}

// Over a cluster node (Config.Retry) a write that names no request_id
// gets one of the server's own, and an answer of unknown outcome runs it
// again under that id: it lands once, answered from its record. When the
// runs are spent the tool error is the node's error document, its code
// UnknownOutcome and its request id named.
func TestToolRetriesUnknownOutcome(t *testing.T) {
	f := newFixture(t)
	svc := &unknownAt{Service: f.svc, lost: 1}
	cs := f.connect(f.serverWith(svc, &service.Retry{Pause: time.Millisecond}), nil)
	res := call(t, cs, "tally_promise/declare", map[string]any{"id": "r1", "promise": "x", "to": "author", "until": "2h"})
	if res.IsError || res.Meta["tally/replayed"] != true {
		t.Fatalf("declare: %s (meta %v)", text(res), res.Meta)
	}
	if len(svc.ids) != 2 || !strings.HasPrefix(svc.ids[0], "req-") || svc.ids[1] != svc.ids[0] {
		t.Fatalf("request ids %q", svc.ids)
	}
	list := ok(t, cs, "tally_promise_read/list", map[string]any{"state": "all"})
	if ps, _ := list["promises"].([]any); len(ps) != 1 {
		t.Fatalf("the write landed %d times", len(ps))
	}

	svc = &unknownAt{Service: f.svc, lost: 100}
	cs = f.connect(f.serverWith(svc, &service.Retry{Attempts: 3, Pause: time.Millisecond}), nil)
	res = call(t, cs, "tally_promise/declare", map[string]any{"id": "r2", "promise": "y", "to": "author", "until": "2h", "request_id": "k2"})
	want := `{"schema_version":1,"error":"group 2 did not answer the write at this node: node: timed out waiting for the group; the write may have committed: retry it with the same request id \"k2\", which answers it from its record if it did","code":"UnknownOutcome","request_id":"k2"}` + "\n"
	if !res.IsError || text(res) != want || len(svc.ids) != 3 {
		t.Fatalf("runs spent: %d runs, %s", len(svc.ids), text(res))
	}

	// Without Config.Retry (a single server, stdio) a call runs once, as
	// given.
	svc = &unknownAt{Service: f.svc, lost: 100}
	cs = f.connect(f.serverWith(svc, nil), nil)
	res = call(t, cs, "tally_promise/declare", map[string]any{"id": "r3", "promise": "z", "to": "author", "until": "2h"})
	if !res.IsError || len(svc.ids) != 1 || svc.ids[0] != "" || !strings.Contains(text(res), "it carried no request id") {
		t.Fatalf("without Retry: %d runs, ids %q, %s", len(svc.ids), svc.ids, text(res))
	}
}
