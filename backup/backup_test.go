package backup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/artifact"
	"tally/digest"
	"tally/store"
)

var created = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func header() Header {
	return Header{Tally: "test", Created: created, Source: Source{Kind: SourceLedger}}
}

// appendRecords appends records to a session of the ledger at root.
func appendRecords(t testing.TB, root, tenant, session string, bodies ...string) store.Position {
	t.Helper()
	dir, err := store.SessionDir(root, tenant, session)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	tx, err := lg.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.CatchUp(store.Position{}, func(store.Entry) error { return nil }); err != nil {
		t.Fatal(err)
	}
	for _, b := range bodies {
		if _, err := tx.Append(store.Record{Body: []byte(b)}); err != nil {
			t.Fatal(err)
		}
	}
	pos, err := tx.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func note(i int) string {
	return fmt.Sprintf(`{"ts":"2026-09-01T00:00:00Z","type":"promise","id":"p%d","promise":"note %d","by":"a","to":"b","until":"2026-09-02T00:00:00Z"}`, i, i)
}

func artifactRecord(content digest.ContentDigest, size int) string {
	return fmt.Sprintf(`{"ts":"2026-09-01T17:00:00Z","type":"claim.artifact","claim":"C17","artifact":"A","role":"output","slot":"change","kind":"patch","cycle":1,"generation":1,"content":"%s","size":%d,"digest":"%s"}`,
		content, size, strings.Repeat("b", 64))
}

// fixture is a ledger directory with three sessions over two tenants and
// one artifact named by a claim record; it returns the ledger and the
// object's bytes.
func fixture(t testing.TB) (string, []byte) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "ledger")
	if err := store.Init(root); err != nil {
		t.Fatal(err)
	}
	objects, err := artifact.OpenStore(store.ObjectsDir(root))
	if err != nil {
		t.Fatal(err)
	}
	content := []byte("fixed: reject incomplete Unicode escapes\n")
	d, err := objects.PutBytes(context.Background(), content)
	if err != nil {
		t.Fatal(err)
	}
	// An object no session names stays out of the backup.
	if _, err := objects.PutBytes(context.Background(), []byte("stray")); err != nil {
		t.Fatal(err)
	}
	appendRecords(t, root, "acme", "main", note(1), note(2), artifactRecord(d, len(content)))
	appendRecords(t, root, "acme", "other", note(3))
	appendRecords(t, root, "beta", "main", note(4), note(5))
	return root, content
}

func take(t testing.TB, root string) ([]byte, Summary) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Take(context.Background(), &buf, header(), root, SettledCut)
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), sum
}

// A ledger's backup verifies, says what it holds, and restores to the same
// logs and objects.
func TestRoundTrip(t *testing.T) {
	root, content := fixture(t)
	settings := store.Settings{LineageMax: 5, RequestHistory: "72h"}
	h := header()
	h.Settings = &settings
	var buf bytes.Buffer
	wrote, err := Take(context.Background(), &buf, h, root, SettledCut)
	if err != nil {
		t.Fatal(err)
	}
	file := buf.Bytes()
	got, err := Verify(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	if got.Size != int64(len(file)) || wrote.Size != got.Size || got.Digest != wrote.Digest {
		t.Fatalf("sizes %d/%d/%d, digests %x/%x", got.Size, wrote.Size, len(file), got.Digest, wrote.Digest)
	}
	var names []string
	for _, c := range got.Sessions {
		names = append(names, fmt.Sprintf("%s@%d", c.Name(), c.Seq))
	}
	if fmt.Sprint(names) != "[acme/main@3 acme/other@1 beta/main@2]" || got.Objects != 1 || got.ObjectBytes != int64(len(content)) {
		t.Fatalf("summary: %v, %d objects of %d bytes", names, got.Objects, got.ObjectBytes)
	}
	if !got.Header.Created.Equal(created) || got.Header.Format != Format || got.Header.Source.Kind != SourceLedger {
		t.Fatalf("header %+v", got.Header)
	}

	into := filepath.Join(t.TempDir(), "restored")
	if _, err := Restore(context.Background(), bytes.NewReader(file), into); err != nil {
		t.Fatal(err)
	}
	if st, err := store.ReadSettings(into); err != nil || st != settings {
		t.Fatalf("settings restored as %+v: %v", st, err)
	}
	for _, c := range got.Sessions {
		a, _ := store.SessionDir(root, c.Tenant, c.Session)
		b, _ := store.SessionDir(into, c.Tenant, c.Session)
		wa, _ := os.ReadFile(store.LogPath(a))
		wb, _ := os.ReadFile(store.LogPath(b))
		if !bytes.Equal(wa, wb) {
			t.Errorf("session %s restored differently", c.Name())
		}
	}
	objects, _ := artifact.OpenStore(store.ObjectsDir(into))
	if b, err := objects.Get(context.Background(), digest.HashContent(content)); err != nil || !bytes.Equal(b, content) {
		t.Fatalf("object restored as %q: %v", b, err)
	}
	if objects.Has(digest.HashContent([]byte("stray"))) {
		t.Fatal("an object no session names was restored")
	}
	// A restore needs a ledger without sessions.
	if _, err := Restore(context.Background(), bytes.NewReader(file), into); err == nil || !strings.Contains(err.Error(), "already holds sessions") {
		t.Fatalf("restore over sessions: %v", err)
	}
}

// Every byte of the file is covered: changing any one is refused, and so
// is a file cut short anywhere or with bytes after its end.
func TestDamageAnywhereIsRefused(t *testing.T) {
	root, _ := fixture(t)
	file, _ := take(t, root)
	for i := range file {
		damaged := bytes.Clone(file)
		damaged[i] ^= 0x01
		if _, err := Verify(bytes.NewReader(damaged)); err == nil {
			t.Fatalf("a flipped bit in byte %d (%q) was not noticed", i, file[max(0, i-20):min(len(file), i+20)])
		}
	}
	for n := range file {
		_, err := Verify(bytes.NewReader(file[:n]))
		var de *DamageError
		if !errors.As(err, &de) {
			t.Fatalf("the file cut to %d of %d bytes: %v", n, len(file), err)
		}
	}
	if _, err := Verify(bytes.NewReader(append(bytes.Clone(file), '\n'))); err == nil || !strings.Contains(err.Error(), "bytes follow") {
		t.Fatalf("a byte after the end: %v", err)
	}
}

// The refusals name the part and the rule.
func TestDamageIsNamed(t *testing.T) {
	root, content := fixture(t)
	file, _ := take(t, root)
	cases := []struct {
		name   string
		change func([]byte) []byte
		want   string
	}{
		{"not a backup", func([]byte) []byte { return []byte("{\"promise\":1}\n") }, "not a tally backup"},
		{"a later format", func(b []byte) []byte {
			return bytes.Replace(b, []byte("tally backup v1"), []byte("tally backup v7"), 1)
		}, "backup format v7: this tally reads v1"},
		{"cut short", func(b []byte) []byte { return b[:len(b)/2] }, "cut short"},
		{"a log line altered", func(b []byte) []byte { return bytes.Replace(b, []byte("note 2"), []byte("note 9"), 1) }, "session acme/main, at byte"},
		{"an object altered", func(b []byte) []byte { return bytes.Replace(b, content[:5], []byte("FIXED"), 1) }, "its bytes hash to"},
		{"the end's digest", func(b []byte) []byte {
			i := bytes.LastIndex(b, []byte(`"digest":"`)) + len(`"digest":"`)
			b[i] = map[byte]byte{'0': '1'}[b[i]] | '0'
			return b
		}, "a byte was altered"},
		{"a session dropped", func(b []byte) []byte {
			from := bytes.Index(b, []byte("session {\"tenant\":\"acme\",\"session\":\"other\""))
			to := bytes.Index(b, []byte("session {\"tenant\":\"beta\""))
			return append(bytes.Clone(b[:from]), b[to:]...)
		}, "end, at byte"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Verify(bytes.NewReader(c.change(bytes.Clone(file))))
			var de *DamageError
			if !errors.As(err, &de) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a damage naming %q", err, c.want)
			}
		})
	}
}

// The writer refuses a source that is not what it declares: a damaged
// log, a cut inside a line, an object missing or damaged.
func TestWriterRefusesItsSource(t *testing.T) {
	root, _ := fixture(t)
	dir, _ := store.SessionDir(root, "acme", "other")
	log, _ := os.ReadFile(store.LogPath(dir))

	w, _ := NewWriter(io.Discard, header())
	pos, _ := SettledCut(context.Background(), dir)
	cut := Cut{Tenant: "acme", Session: "other", Seq: pos.Seq, Hash: pos.Hash, Bytes: pos.Offset}
	damaged := bytes.Replace(log, []byte("note 3"), []byte("note 8"), 1)
	if err := w.Session(cut, bytes.NewReader(damaged)); err == nil || !strings.Contains(err.Error(), "line 1: chain hash") {
		t.Fatalf("a damaged log: %v", err)
	}

	w, _ = NewWriter(io.Discard, header())
	short := cut
	short.Bytes--
	if err := w.Session(short, bytes.NewReader(log)); err == nil || !strings.Contains(err.Error(), "inside line 1") {
		t.Fatalf("a cut inside a line: %v", err)
	}

	w, _ = NewWriter(io.Discard, header())
	if err := w.Session(cut, bytes.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	if err := w.Session(cut, bytes.NewReader(log)); err == nil || !strings.Contains(err.Error(), "in order, each once") {
		t.Fatalf("a session twice: %v", err)
	}

	// The object a claim record names is damaged in the store.
	objects, _ := artifact.OpenStore(store.ObjectsDir(root))
	d := digest.HashContent([]byte("fixed: reject incomplete Unicode escapes\n"))
	if err := os.WriteFile(objects.Path(d), []byte("fixed: accept anything\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(context.Background(), io.Discard, header(), root, SettledCut); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("a damaged object: %v", err)
	}
	os.Remove(objects.Path(d))
	if _, err := Take(context.Background(), io.Discard, header(), root, SettledCut); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("a missing object: %v", err)
	}
}

// A session's cut holds what was durable when it was taken, not the lines
// a writer appends while the backup streams.
func TestCutBeforeLaterWrites(t *testing.T) {
	root, _ := fixture(t)
	dir, _ := store.SessionDir(root, "beta", "main")
	pos, err := SettledCut(context.Background(), dir)
	if err != nil || pos.Seq != 2 {
		t.Fatalf("cut at %+v: %v", pos, err)
	}
	appendRecords(t, root, "beta", "main", note(6))
	var buf bytes.Buffer
	w, _ := NewWriter(&buf, header())
	f, _ := os.Open(store.LogPath(dir))
	defer f.Close()
	if err := w.Session(Cut{Tenant: "beta", Session: "main", Seq: pos.Seq, Hash: pos.Hash, Bytes: pos.Offset}, f); err != nil {
		t.Fatal(err)
	}
	sum, err := w.Close()
	if err != nil || sum.Sessions[0].Seq != 2 {
		t.Fatalf("%+v: %v", sum, err)
	}
	if _, err := Verify(&buf); err != nil {
		t.Fatal(err)
	}
}

// FuzzVerify feeds arbitrary bytes as a backup file: the reader never
// panics, and a file it accepts is exactly what a Writer makes of the
// parts it read.
func FuzzVerify(f *testing.F) {
	root, _ := fixture(f)
	file, _ := take(f, root)
	f.Add(file)
	f.Add(file[:len(file)/3])
	f.Add([]byte(Magic + `{"format":1,"tally":"x","log_format":1,"created":"2026-12-01T10:00:00Z","source":{"kind":"ledger"}}` + "\nend {\"sessions\":0,\"objects\":0,\"digest\":\"" + strings.Repeat("0", 64) + "\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rd, err := NewReader(bytes.NewReader(data))
		if err != nil {
			return
		}
		var again bytes.Buffer
		w, err := NewWriter(&again, rd.Header())
		if err != nil {
			t.Fatalf("a header the reader took, the writer refuses: %v", err)
		}
		for {
			p, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return
			}
			body, err := io.ReadAll(p.Body)
			if err != nil {
				return
			}
			if p.Session != nil {
				err = w.Session(*p.Session, bytes.NewReader(body))
			} else {
				err = w.Object(p.Object.Content, p.Object.Bytes, bytes.NewReader(body))
			}
			if err != nil {
				t.Fatalf("a part the reader took, the writer refuses: %v", err)
			}
		}
		if _, err := w.Close(); err != nil {
			t.Fatalf("the writer refuses what the reader took: %v", err)
		}
		if !bytes.Equal(again.Bytes(), data) {
			t.Fatalf("accepted %d bytes that the writer makes as %d other bytes", len(data), again.Len())
		}
	})
}
