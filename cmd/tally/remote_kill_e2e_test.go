package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// declareOnce sends one declaration with an idempotency key; ok is false when no
// response came back (the server died under it).
func (s *server) declareOnce(t *testing.T, who, key, body string) (code int, resp string, replayed, ok bool) {
	t.Helper()
	req, err := http.NewRequest("POST", s.url+"/v1/tenants/default/sessions/default/promises", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.tokens[who])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		return 0, "", false, false
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, "", false, false
	}
	return res.StatusCode, string(b), res.Header.Get("Idempotent-Replayed") == "true", true
}

// A client whose server is killed with SIGKILL retries with the same
// Idempotency-Key against the restarted server: an answered request gets
// its recorded response byte for byte, an unanswered one is executed at
// most once, and every declaration is in the ledger exactly once.
func TestServerKilledRetryIsIdempotent(t *testing.T) {
	s := startServer(t, "reviewer")
	body := func(i int) string {
		return fmt.Sprintf(`{"id":"k%03d","promise":"review %d","to":"author","until":"2026-12-31T00:00:00Z"}`, i, i)
	}
	// One answered before the kill.
	code, first, _, ok := s.declareOnce(t, "reviewer", "key-000", body(0))
	if !ok || code != 201 {
		t.Fatalf("first: %d %s", code, first)
	}
	// Writers that keep declaring until the kill lands: by then some
	// requests are answered, some committed but unanswered, some neither.
	const workers, each = 16, 40
	n := 1 + workers*each
	type answer struct {
		code int
		body string
		ok   bool
	}
	answers := make([]answer, n)
	var answeredLive atomic.Int64 // answers before the kill
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for j := 0; j < each; j++ {
				i := 1 + w*each + j
				c, b, _, ok := s.declareOnce(t, "reviewer", fmt.Sprintf("key-%03d", i), body(i))
				answers[i] = answer{c, b, ok}
				if !ok {
					return
				}
				answeredLive.Add(1)
			}
		}(w)
	}
	// The kill lands once every writer could have had an answer, while
	// the rest are in flight.
	for deadline := time.Now().Add(10 * time.Second); answeredLive.Load() < workers; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d answers in 10s", answeredLive.Load())
		}
	}
	s.kill9(t)
	wg.Wait()
	committed := strings.Count(s.local(t, "ls", "--all", "--json").out, `"id":"k`)
	s.start(t)

	code, again, replayed, ok := s.declareOnce(t, "reviewer", "key-000", body(0))
	if !ok || code != 201 || again != first || !replayed {
		t.Fatalf("retry after kill -9: %d replayed=%v\n%s\nwant\n%s", code, replayed, again, first)
	}
	answered := 0
	for i := 1; i < n; i++ {
		code, got, replayed, ok := s.declareOnce(t, "reviewer", fmt.Sprintf("key-%03d", i), body(i))
		if !ok || code != 201 {
			t.Fatalf("retry %d: %d %s", i, code, got)
		}
		if a := answers[i]; a.ok {
			answered++
			if a.code != 201 || got != a.body || !replayed {
				t.Fatalf("retry %d of an answered request: %d replayed=%v %s\nwant %d %s", i, code, replayed, got, a.code, a.body)
			}
		}
	}
	t.Logf("at the kill: %d answered, %d committed", answered+1, committed)
	// Each declaration once, and the log whole.
	r := s.local(t, "ls", "--all", "--json")
	if r.code != 0 {
		t.Fatalf("ls: %v", r)
	}
	for i := 0; i < n; i++ {
		if c := strings.Count(r.out, fmt.Sprintf(`"id":"k%03d"`, i)); c != 1 {
			t.Fatalf("k%03d is in the ledger %d times", i, c)
		}
	}
	if r := s.local(t, "verify"); r.code != 0 {
		t.Fatalf("verify: %v", r)
	}
}
