package timekeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"tally/internal/tick"
)

// The one poster both HTTP sinks use: the same body and headers on every
// attempt, the backoff doubled to its ceiling, the error naming what and
// the last answer; an error final reports, or a context ended, stops it.
func TestPosterRetries(t *testing.T) {
	var mu sync.Mutex
	var got []string
	fail := 3
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Content-Type")+" "+r.Header.Get("X-Key")+" "+string(b))
		if len(got) <= fail {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	var waits []time.Duration
	p := poster{client: srv.Client(), attempts: 4, backoff: 10 * time.Millisecond, ceiling: 25 * time.Millisecond,
		sleep: func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil }}
	hdr := http.Header{"x-key": {"k1"}} // as given, not canonical: Add makes it so
	if err := p.post(context.Background(), "test "+srv.URL, srv.URL, hdr, []byte(`{"a":1}`), nil); err != nil {
		t.Fatal(err)
	}
	want := `application/json k1 {"a":1}`
	if fmt.Sprint(got) != fmt.Sprint([]string{want, want, want, want}) || fmt.Sprint(waits) != "[10ms 20ms 25ms]" {
		t.Fatalf("requests %q waits %v", got, waits)
	}

	got, fail = nil, 10
	err := p.post(context.Background(), "test", srv.URL, nil, nil, nil)
	if err == nil || err.Error() != "test: 4 attempts: answered 503 Service Unavailable" || len(got) != 4 {
		t.Fatalf("never recovers: %v after %d requests", err, len(got))
	}

	got = nil
	stop := errors.New("stop")
	p.final = func(err error) bool { return errors.Is(err, stop) }
	err = p.post(context.Background(), "test", srv.URL, nil, nil, func(*http.Response) error { return stop })
	if !errors.Is(err, stop) || err.Error() != "test: stop" || len(got) != 1 {
		t.Fatalf("final: %v after %d requests", err, len(got))
	}

	got = nil
	ctx, cancel := context.WithCancel(context.Background())
	p.final = nil
	p.sleep = tick.Sleep
	err = p.post(ctx, "test", srv.URL, nil, nil, func(*http.Response) error { cancel(); return errors.New("answered 503") })
	if err == nil || err.Error() != "test: answered 503" || len(got) != 1 {
		t.Fatalf("cancelled: %v after %d requests", err, len(got))
	}
}
