package ledger

import (
	"tally/service"

	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"tally/promise"
)

func render(st *State, res []Result) []byte {
	return []byte(fmt.Sprintf(`{"seq":%d,"promises":%d}`, res[0].Seq, st.Promises.Len()))
}

func TestIdempotentRetries(t *testing.T) {
	dir := t.TempDir()
	clock := t0
	cfg := testConfig(t0)
	cfg.Now = func() time.Time { return clock }
	l := open(t, dir, cfg)
	ctx := context.Background()
	idem := func(key string, digest byte) *Idempotency {
		return &Idempotency{Principal: "d", Key: key, Digest: [32]byte{digest}, Render: render}
	}
	cmd := Command{Promise: promise.Declare{Text: "x", By: "d", To: "c", Until: t0.Add(time.Hour)}}
	_, first, replayed, err := l.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k1", 1))
	if err != nil || replayed || string(first) != `{"seq":1,"promises":1}` {
		t.Fatalf("first: %s %v %v", first, replayed, err)
	}
	before, _ := os.ReadFile(l.Log().Path())
	// The same key and command: the recorded response, nothing appended
	// (not even a second minted promise).
	_, again, replayed, err := l.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k1", 1))
	if err != nil || !replayed || !bytes.Equal(again, first) {
		t.Fatalf("retry: %s %v %v", again, replayed, err)
	}
	// The same key, another command: conflict.
	var ie *service.IdempotencyError
	if _, _, _, err := l.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k1", 2)); !errors.As(err, &ie) || ie.Code != service.CodeIdempotencyConflict {
		t.Fatalf("conflict: %v", err)
	}
	// Another principal's key of the same name is its own.
	other := &Idempotency{Principal: "e", Key: "k1", Digest: [32]byte{1}, Render: render}
	if _, _, replayed, err := l.Execute(ctx, Command{Promise: promise.Declare{Text: "y", By: "e", To: "c", Until: t0.Add(time.Hour)}}, WriteOptions{Actor: "e"}, other); err != nil || replayed {
		t.Fatalf("other principal: %v %v", replayed, err)
	}
	after, _ := os.ReadFile(l.Log().Path())
	if !bytes.HasPrefix(after, before) {
		t.Fatal("log rewritten")
	}
	// After a restart (and through a checkpoint), the same response.
	l.Checkpoint()
	l2 := open(t, dir, cfg)
	_, again, replayed, err = l2.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k1", 1))
	if err != nil || !replayed || !bytes.Equal(again, first) {
		t.Fatalf("after restart: %s %v %v", again, replayed, err)
	}
	// Past the retained history: refused, never executed again.
	clock = t0.Add(25 * time.Hour)
	n := 0
	l2.Read(func(st *State) { n = st.Promises.Len() })
	if _, _, _, err := l2.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k1", 1)); !errors.As(err, &ie) || ie.Code != service.CodeRequestHistoryExpired {
		t.Fatalf("expired: %v", err)
	}
	l2.Read(func(st *State) {
		if st.Promises.Len() != n {
			t.Fatal("an expired request was executed")
		}
	})
	// A refused command records nothing: the key stays free.
	bad := Command{Promise: promise.Amend{ID: "nope", Until: t0}}
	if _, _, _, err := l2.Execute(ctx, bad, WriteOptions{Actor: "d"}, idem("k2", 3)); err == nil {
		t.Fatal("refusal accepted")
	}
	if _, resp, _, err := l2.Execute(ctx, cmd, WriteOptions{Actor: "d"}, idem("k2", 1)); err != nil || len(resp) == 0 {
		t.Fatalf("key of a refused request not free: %v", err)
	}
}
