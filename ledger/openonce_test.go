package ledger

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Concurrent Gets of one key open it once and share it; a failed open
// holds nothing (the next Get opens again); Close closes what is held and
// forgets it.
func TestOpenOnce(t *testing.T) {
	var o OpenOnce
	dir := t.TempDir()
	var opened atomic.Int32
	openA := func() (*Ledger, error) {
		opened.Add(1)
		return Open(dir, testConfig(t0))
	}
	got := make([]*Ledger, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			l, err := o.Get("acme/a", openA)
			if err != nil {
				t.Error(err)
			}
			got[i] = l
		})
	}
	wg.Wait()
	if opened.Load() != 1 {
		t.Fatalf("opened %d times", opened.Load())
	}
	for _, l := range got {
		if l != got[0] || l == nil {
			t.Fatalf("the Gets were given different ledgers: %p, %p", l, got[0])
		}
	}
	refused := errors.New("refused")
	if _, err := o.Get("acme/b", func() (*Ledger, error) { return nil, refused }); !errors.Is(err, refused) {
		t.Fatalf("a failed open: %v", err)
	}
	b := t.TempDir()
	if l, err := o.Get("acme/b", func() (*Ledger, error) { return Open(b, testConfig(t0)) }); err != nil || l == nil {
		t.Fatalf("after a failed open: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Get("acme/a", openA); err != nil || opened.Load() != 2 {
		t.Fatalf("after Close: %v, opened %d times, want 2", err, opened.Load())
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
}
