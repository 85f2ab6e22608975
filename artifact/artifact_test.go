package artifact

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"tally/digest"
)

func TestDigestWireForm(t *testing.T) {
	d := digest.HashContent([]byte("hello"))
	s := d.String()
	if len(s) != 64 || strings.ToLower(s) != s {
		t.Fatalf("wire form %q", s)
	}
	back, err := digest.ParseContentDigest(s)
	if err != nil || back != d {
		t.Fatalf("round trip: %v %v", back, err)
	}
	for _, bad := range []string{"", "00", strings.ToUpper(s), s + "0", strings.Repeat("g", 64)} {
		if _, err := digest.ParseContentDigest(bad); err == nil {
			t.Errorf("ParseContentDigest(%q) accepted", bad)
		}
	}
}

// Every description field is covered; the artifact id is not part of it.
func TestArtifactDigestCoversDescription(t *testing.T) {
	base := digest.Description{Kind: "patch", Schema: "text/x-diff", Producer: "parser", Claim: "C17", Cycle: 1, Role: "output", Slot: "change", Size: 5, Content: digest.HashContent([]byte("patch"))}
	d0 := digest.ArtifactDigest(base)
	if digest.ArtifactDigest(base) != d0 {
		t.Fatal("not deterministic")
	}
	mutations := []func(*digest.Description){
		func(d *digest.Description) { d.Kind = "patch2" },
		func(d *digest.Description) { d.Schema = "x" },
		func(d *digest.Description) { d.Producer = "other" },
		func(d *digest.Description) { d.Claim = "C18" },
		func(d *digest.Description) { d.Cycle = 2 },
		func(d *digest.Description) { d.Role = "diagnostic" },
		func(d *digest.Description) { d.Slot = "other" },
		func(d *digest.Description) { d.Size = 6 },
		func(d *digest.Description) { d.Content = digest.HashContent([]byte("patcH")) },
	}
	for i, m := range mutations {
		d := base
		m(&d)
		if digest.ArtifactDigest(d) == d0 {
			t.Errorf("mutation %d not covered by the digest", i)
		}
	}
	if digest.ArtifactDigest(base) == digest.Digest(base.Content) {
		t.Fatal("artifact digest equals content digest")
	}
}

func TestDescriptionValidate(t *testing.T) {
	ok := digest.Description{Kind: "k", Producer: "p", Claim: "c", Content: digest.HashContent(nil)}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	bad := ok
	bad.Content = digest.ContentDigest{}
	if bad.Validate() == nil {
		t.Fatal("zero content accepted")
	}
}

func newStore(t testing.TB) *Store {
	t.Helper()
	s, err := OpenStore(filepath.Join(t.TempDir(), "objects"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStorePutGet(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	content := bytes.Repeat([]byte("tally "), 500_000) // > one copy buffer
	d, n, err := s.Put(ctx, bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(content)) || d != digest.HashContent(content) {
		t.Fatalf("put: size %d digest %s", n, d)
	}
	h := d.String()
	if _, err := os.Stat(filepath.Join(s.Dir(), h[:2], h[2:])); err != nil {
		t.Fatalf("fan-out path: %v", err)
	}
	got, err := s.Get(ctx, d)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("get: %v", err)
	}
	r, err := s.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	read, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(read, content) {
		t.Fatalf("open: %v", err)
	}
	if err := s.Verify(ctx, d); err != nil {
		t.Fatal(err)
	}
	// Idempotent put; nothing left in tmp.
	if d2, _, err := s.Put(ctx, bytes.NewReader(content)); err != nil || d2 != d {
		t.Fatalf("second put: %v", err)
	}
	left, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
}

func TestStoreEmptyContent(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	d, n, err := s.Put(ctx, bytes.NewReader(nil))
	if err != nil || n != 0 || d != digest.HashContent(nil) {
		t.Fatalf("empty put: %v %d", err, n)
	}
	if b, err := s.Get(ctx, d); err != nil || len(b) != 0 {
		t.Fatalf("empty get: %v", err)
	}
}

func TestStoreNotFound(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	d := digest.HashContent([]byte("absent"))
	if _, err := s.Get(ctx, d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get: %v", err)
	}
	if _, err := s.Open(ctx, d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open: %v", err)
	}
	if err := s.Verify(ctx, d); !errors.Is(err, ErrNotFound) {
		t.Fatalf("verify: %v", err)
	}
}

// A damaged copy is refused on every read path: an error, never the bytes.
func TestStoreDigestMismatchOnReadRefused(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	content := []byte("the patch that was reviewed")
	d, _, err := s.Put(ctx, bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	damaged := append([]byte(nil), content...)
	damaged[4] ^= 1
	if err := os.WriteFile(s.Path(d), damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, d)
	if !IsDamaged(err) || b != nil {
		t.Fatalf("get of damaged copy: %v, %d bytes", err, len(b))
	}
	r, err := s.Open(ctx, d)
	if !IsDamaged(err) || r != nil {
		t.Fatalf("open of damaged copy: %v", err)
	}
	if err := s.Verify(ctx, d); !IsDamaged(err) {
		t.Fatalf("verify of damaged copy: %v", err)
	}
	var de *DamagedError
	errors.As(s.Verify(ctx, d), &de)
	if de.Want != d || de.Got != digest.HashContent(damaged) {
		t.Fatalf("damaged error: %+v", de)
	}
	// A new put of the right bytes repairs the copy.
	if _, _, err := s.Put(ctx, bytes.NewReader(content)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get(ctx, d); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("after repair: %v", err)
	}
}

// Bytes changed after Open verified them end in a DamagedError, not io.EOF.
func TestOpenDetectsChangeDuringRead(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	content := bytes.Repeat([]byte("x"), 4096)
	d, _ := s.PutBytes(ctx, content)
	r, err := s.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	f, _ := os.OpenFile(s.Path(d), os.O_WRONLY, 0)
	f.WriteAt([]byte("y"), 100)
	f.Close()
	if _, err := io.ReadAll(r); !IsDamaged(err) {
		t.Fatalf("read of bytes changed under the reader: %v", err)
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("boom")
	}
	f.n--
	return copy(p, "abc"), nil
}

func TestPutReaderErrorLeavesNothing(t *testing.T) {
	s := newStore(t)
	if _, _, err := s.Put(context.Background(), &failingReader{n: 3}); err == nil {
		t.Fatal("put of failing reader succeeded")
	}
	left, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp"))
	if len(left) != 0 {
		t.Fatalf("temp files left: %v", left)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := s.Put(ctx, bytes.NewReader([]byte("x"))); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled put: %v", err)
	}
}

const size64MiB = 64 << 20

func randomFile(b *testing.B) string {
	b.Helper()
	path := filepath.Join(b.TempDir(), "src")
	buf := make([]byte, size64MiB)
	rand.Read(buf)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkPut64MiB is a durable Put of a 64 MiB file (hash, write, fsync,
// rename, directory fsync). These machines are noisy, so each iteration also
// runs the baselines outside the timer and the benchmark reports the ratios
// measured side by side:
//
//	ratio-vs-hash+copy       Put rate / (blake3 hash, then io.Copy to a file)
//	ratio-vs-hash+copy+sync  Put rate / (the same plus one fsync)
//
// BenchmarkBaselineHashCopy64MiB runs the first baseline alone.
func BenchmarkPut64MiB(b *testing.B) {
	src := randomFile(b)
	s := newStore(b)
	dst := filepath.Join(b.TempDir(), "dst")
	ctx := context.Background()
	var put, plain, synced time.Duration
	b.SetBytes(size64MiB)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Each iteration stores new content: change the last byte.
		f, _ := os.OpenFile(src, os.O_RDWR, 0)
		f.WriteAt([]byte{byte(i)}, size64MiB-1)
		f.Seek(0, io.SeekStart)
		start := time.Now()
		b.StartTimer()
		d, _, err := s.Put(ctx, f)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		put += time.Since(start)
		f.Close()
		os.Remove(s.Path(d))
		plain += hashCopy(b, src, dst, false)
		synced += hashCopy(b, src, dst, true)
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(plain.Seconds()/put.Seconds(), "ratio-vs-hash+copy")
	b.ReportMetric(synced.Seconds()/put.Seconds(), "ratio-vs-hash+copy+sync")
}

// hashCopy is the baseline: hash src with plain blake3, then io.Copy it to
// dst (and fsync when sync is set). It returns the time taken.
func hashCopy(b *testing.B, src, dst string, sync bool) time.Duration {
	start := time.Now()
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	h := blake3.New()
	if _, err := io.Copy(h, in); err != nil {
		b.Fatal(err)
	}
	_ = h.Sum(nil)
	in.Seek(0, io.SeekStart)
	out, err := os.Create(dst)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if sync {
		out.Sync()
	}
	out.Close()
	return time.Since(start)
}

func BenchmarkBaselineHashCopy64MiB(b *testing.B) {
	src := randomFile(b)
	dst := filepath.Join(b.TempDir(), "dst")
	b.SetBytes(size64MiB)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		hashCopy(b, src, dst, false)
	}
}

// FuzzParseDigest: whatever parses prints back as the same digest, and
// parses again to it.
func FuzzParseDigest(f *testing.F) {
	f.Add(strings.Repeat("ab", 32))
	f.Add("blake3:" + strings.Repeat("0f", 32))
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := digest.ParseDigest(s); err == nil {
			if again, err := digest.ParseDigest(d.String()); err != nil || again != d {
				t.Fatalf("%q parsed to %s, which reads back as %s, %v", s, d, again, err)
			}
		}
		if d, err := digest.ParseContentDigest(s); err == nil {
			if again, err := digest.ParseContentDigest(d.String()); err != nil || again != d {
				t.Fatalf("%q parsed to %s, which reads back as %s, %v", s, d, again, err)
			}
		}
	})
}

// A copy fetched from another node is named only if its bytes are the
// content and size asked for: bytes that are not, or are cut short, are
// discarded and nothing is left in the store; a damaged copy in place is
// replaced by bytes that verify.
func TestPutVerifiedStoresOnlyBytesThatVerify(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	want := bytes.Repeat([]byte("patch "), 300_000)
	d := digest.HashContent(want)
	other := append(bytes.Clone(want[:len(want)-1]), 'x')
	for _, c := range []struct {
		name string
		body []byte
		size int64
		why  string
	}{
		{"other bytes", other, int64(len(want)), "damaged"},
		{"cut short", want[:len(want)/2], int64(len(want)), "bytes arrived"},
		{"more than said", want, int64(len(want)) - 1, "bytes arrived"},
	} {
		err := s.PutVerified(ctx, bytes.NewReader(c.body), d, c.size)
		if err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: %v", c.name, err)
		}
		if s.Has(d) {
			t.Fatalf("%s: stored under %s", c.name, d)
		}
		if left, _ := os.ReadDir(filepath.Join(s.Dir(), "tmp")); len(left) != 0 {
			t.Fatalf("%s: left %v", c.name, left)
		}
	}
	if err := os.MkdirAll(filepath.Dir(s.Path(d)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(d), other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.PutVerified(ctx, bytes.NewReader(want), d, int64(len(want))); err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(ctx, d); err != nil {
		t.Fatalf("the damaged copy was not replaced: %v", err)
	}
}
