package main

// The artifact limit end to end: `tally serve --max-artifact-bytes`, and the
// CLI as its client declaring the file's length, so a file over the limit
// is refused (413 ArtifactTooLarge, exit 2) before a byte of it is sent or
// staged, and the log is unchanged.

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestServeMaxArtifactBytesRefusesALargerFileBeforeStaging(t *testing.T) {
	srv := startServerWith(t, []string{"--max-artifact-bytes", "4KiB"}, "maintainer", "parser")
	work := t.TempDir()
	big, small := filepath.Join(work, "big.bin"), filepath.Join(work, "small.patch")
	if err := os.WriteFile(big, bytes.Repeat([]byte("z"), 5000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(small, []byte("--- a\n+++ b\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	custodyClaim(t, func(who string, args ...string) result { return srv.as(t, who, args...) })
	log := filepath.Join(srv.dir, "sessions", "default", "default", "log.jsonl")
	before, _ := os.ReadFile(log)
	r := srv.as(t, "parser", "artifact", "put", big, "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "big")
	if r.code != 2 || !strings.Contains(r.err, "body: 5000 bytes declared, over this server's limit of 4096 bytes (4KiB, serve --max-artifact-bytes); nothing was stored") {
		t.Fatalf("over the limit: %v", r)
	}
	r = srv.as(t, "parser", "--json", "artifact", "put", big, "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "big")
	if r.code != 2 || !strings.Contains(r.err, `"code":"ArtifactTooLarge"`) || !strings.Contains(r.err, `"limit":4096`) {
		t.Fatalf("over the limit, --json: %v", r)
	}
	after, _ := os.ReadFile(log)
	if !bytes.Equal(before, after) {
		t.Fatal("a refused upload was appended")
	}
	filepath.WalkDir(filepath.Join(srv.dir, "objects"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "collect.lock" {
			t.Errorf("a refused upload left %s", p)
		}
		return nil
	})
	if r := srv.as(t, "parser", "artifact", "put", small, "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "small"); r.code != 0 {
		t.Fatalf("under the limit: %v", r)
	}
	// A size that is not one is a usage error naming the flag.
	r = run(t, runOpts{}, "serve", "--dir", t.TempDir(), "--max-artifact-bytes", "lots")
	if r.code != 2 || !strings.Contains(r.err, `max-artifact-bytes: must be a size of at least 1 byte, such as 64MiB (got "lots")`) {
		t.Fatalf("bad size: %v", r)
	}
}
