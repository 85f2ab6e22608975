package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"tally/digest"
)

// corrupt flips one byte of the stored copy of d.
func corrupt(t *testing.T, s *Store, d digest.ContentDigest) {
	t.Helper()
	b, err := os.ReadFile(s.Path(d))
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(s.Path(d), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestObjectsListsEveryObjectAndNothingElse(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	a, _ := s.PutBytes(ctx, []byte("alpha"))
	b, _ := s.PutBytes(ctx, bytes.Repeat([]byte("b"), 3000))
	// Not objects: a staging file, a stray file, a file not named by a digest.
	os.WriteFile(filepath.Join(s.Dir(), "tmp", "put-1"), []byte("half"), 0o644)
	os.WriteFile(filepath.Join(s.Dir(), "stray"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(filepath.Dir(s.Path(a)), "not-a-digest"), []byte("x"), 0o644)
	objs, err := s.Objects()
	if err != nil {
		t.Fatal(err)
	}
	want := map[digest.ContentDigest]int64{a: 5, b: 3000}
	if len(objs) != 2 {
		t.Fatalf("objects: %+v", objs)
	}
	for _, o := range objs {
		if want[o.Content] != o.Size || o.Put.IsZero() {
			t.Errorf("object %+v", o)
		}
	}
}

func TestScrubFindsADamagedCopyAndCountsWhatItRead(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	good, _ := s.PutBytes(ctx, []byte("intact bytes"))
	bad, _ := s.PutBytes(ctx, []byte("bytes that rot on the disk"))
	corrupt(t, s, bad)
	var found []Checked
	stats := &ScrubStats{}
	sc := &Scrubber{Store: s, Rate: 1 << 30, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Stats: stats, Found: func(c Checked) { found = append(found, c) }}
	got, err := sc.Pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Content != bad || got[0].State != StateDamaged || !IsDamaged(got[0].Err) || len(found) != 1 {
		t.Fatalf("scrub found %+v (told %+v)", got, found)
	}
	if stats.Objects.Load() != 2 || stats.Bytes.Load() != int64(len("intact bytes")+len("bytes that rot on the disk")) || stats.Damaged.Load() != 1 || stats.Passes.Load() != 1 {
		t.Fatalf("stats: objects %d bytes %d damaged %d passes %d", stats.Objects.Load(), stats.Bytes.Load(), stats.Damaged.Load(), stats.Passes.Load())
	}
	// Found or not, the damaged copy is never served; the intact one is.
	if _, err := s.Open(ctx, bad); !IsDamaged(err) {
		t.Fatalf("open the damaged copy: %v", err)
	}
	if _, err := s.Get(ctx, good); err != nil {
		t.Fatal(err)
	}
}

// A scrub reads no faster than its rate: 256 KiB at 1 MiB/s takes about
// a quarter second.
func TestScrubKeepsToItsRate(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	d, _ := s.PutBytes(ctx, bytes.Repeat([]byte("r"), 256<<10))
	start := time.Now()
	if err := s.VerifyPaced(ctx, d, 1<<20); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 200*time.Millisecond {
		t.Fatalf("256 KiB at 1 MiB/s took %v", el)
	}
}

// age sets the last put of d to ago before now.
func age(t *testing.T, s *Store, d digest.ContentDigest, ago time.Duration) {
	t.Helper()
	when := time.Now().Add(-ago)
	if err := os.Chtimes(s.Path(d), when, when); err != nil {
		t.Fatal(err)
	}
}

func TestCollectRemovesOnlyOldUnreferencedBytes(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	kept, _ := s.PutBytes(ctx, []byte("referenced"))
	young, _ := s.PutBytes(ctx, []byte("unreferenced, put a moment ago"))
	old, _ := s.PutBytes(ctx, []byte("unreferenced, put long ago"))
	age(t, s, kept, 48*time.Hour)
	age(t, s, old, 48*time.Hour)
	staged := filepath.Join(s.Dir(), "tmp", "put-abandoned")
	os.WriteFile(staged, []byte("half an upload"), 0o644)
	long := time.Now().Add(-48 * time.Hour)
	os.Chtimes(staged, long, long)
	got, err := s.Collect(ctx, time.Now(), time.Hour, func() (map[digest.ContentDigest]bool, error) {
		return map[digest.ContentDigest]bool{kept: true}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Objects) != 1 || got.Objects[0].Content != old || got.Staged != 1 || got.Bytes != int64(len("unreferenced, put long ago")+len("half an upload")) {
		t.Fatalf("collected %+v", got)
	}
	if s.Has(old) || !s.Has(kept) || !s.Has(young) {
		t.Fatalf("after: old %v kept %v young %v", s.Has(old), s.Has(kept), s.Has(young))
	}
	if _, err := os.Stat(staged); !os.IsNotExist(err) {
		t.Fatalf("abandoned staging file: %v", err)
	}
	// Put again, old bytes start a new grace.
	age(t, s, kept, 48*time.Hour)
	if _, err := s.PutBytes(ctx, []byte("referenced")); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Collect(ctx, time.Now(), time.Hour, func() (map[digest.ContentDigest]bool, error) { return nil, nil })
	if len(got.Objects) != 0 || !s.Has(kept) {
		t.Fatal("bytes put again were collected within their grace")
	}
}

// A publication holding the store (from its put to its append) keeps a
// collection's exclusive lock out until it releases it, in this process
// or another.
func TestHoldKeepsACollectionOut(t *testing.T) {
	s := newStore(t)
	release, err := s.Hold()
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.Hold() // publications share it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.lock(syscall.LOCK_EX | syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("a collection's lock while publications hold the store: %v", err)
	}
	release()
	other()
	unlock, err := s.lock(syscall.LOCK_EX | syscall.LOCK_NB)
	if err != nil {
		t.Fatalf("a collection's lock once they released it: %v", err)
	}
	unlock()
}

// BenchmarkScrub64MiB is one unpaced re-read of a stored 64 MiB object, the
// scrubber's work per object: its MB/s is the fastest a scrub can go, and
// the ratio to a plain blake3 hash of the same file (outside the timer,
// side by side, since these machines are noisy) is its overhead.
func BenchmarkScrub64MiB(b *testing.B) {
	src := randomFile(b)
	s := newStore(b)
	ctx := context.Background()
	f, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	d, size, err := s.Put(ctx, f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	o := Object{Content: d, Size: size}
	var scrub, plain time.Duration
	b.SetBytes(size64MiB)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		c, err := s.Check(ctx, o, 0)
		if err != nil || c.State != StateOK {
			b.Fatalf("%v %v", c.State, err)
		}
		scrub += time.Since(start)
		b.StopTimer()
		start = time.Now()
		in, _ := os.Open(s.Path(d))
		h := blake3.New()
		io.Copy(h, in)
		in.Close()
		plain += time.Since(start)
		b.StartTimer()
	}
	b.ReportMetric(plain.Seconds()/scrub.Seconds(), "ratio-vs-blake3")
}
