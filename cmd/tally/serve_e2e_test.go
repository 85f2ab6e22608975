package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeMakesAMissingLedger: `tally serve --dir D` on a D that does not
// exist makes the ledger there, as init would, says so in its log, and
// serves it; on a D that exists and is no ledger it refuses as before,
// leaving D as it was.
func TestServeMakesAMissingLedger(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "ledger")
	logPath := filepath.Join(t.TempDir(), "stderr")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	url, _ := serveOn(t, logFile, "--dir", dir, "--insecure-dev")
	resp, err := http.Get(url + "/readyz") // ready: the directory is a ledger
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("readyz: %d", resp.StatusCode)
	}
	logged, _ := os.ReadFile(logPath)
	if !strings.Contains(string(logged), `"msg":"created a ledger","dir":"`+dir+`"`) {
		t.Fatalf("no log line saying the ledger was made: %s", logged)
	}
	if _, err := os.Stat(filepath.Join(dir, "tally.json")); err != nil {
		t.Fatalf("serve made no ledger marker: %v", err)
	}

	// An existing directory that is no ledger is refused and left alone.
	plain := t.TempDir()
	if err := os.WriteFile(filepath.Join(plain, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{}, "serve", "--dir", plain, "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.Contains(r.err, "is not a tally ledger") {
		t.Fatalf("serve on a plain directory: %v", r)
	}
	if ents, _ := os.ReadDir(plain); len(ents) != 1 {
		t.Fatalf("serve changed a plain directory: %v", ents)
	}
}
