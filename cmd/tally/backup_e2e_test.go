package main

// tally backup and tally restore on a local ledger with the real binary:
// a backup taken while tally serve writes the ledger holds every write
// acknowledged before it began and restores into a ledger that verifies;
// bad input is refused with the field and the rule, and writes nothing.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// backupDoc is what backup, backup verify and restore print with --json.
type backupDoc struct {
	Created time.Time `json:"created"`
	Source  struct {
		Kind      string `json:"kind"`
		ClusterID string `json:"cluster_id"`
	} `json:"source"`
	Sessions []struct {
		Session string `json:"session"`
		Seq     uint64 `json:"seq"`
		Hash    string `json:"hash"`
	} `json:"sessions"`
	Objects   int    `json:"objects"`
	Digest    string `json:"digest"`
	ClusterID string `json:"cluster_id"`
}

func readBackupDoc(t *testing.T, r result) backupDoc {
	t.Helper()
	var d backupDoc
	if err := json.Unmarshal([]byte(r.out), &d); err != nil {
		t.Fatalf("%v: %v", r, err)
	}
	return d
}

// seqs is each session's sequence as a backup document prints it.
func (d backupDoc) seqs() map[string]uint64 {
	out := map[string]uint64{}
	for _, s := range d.Sessions {
		out[s.Session] = s.Seq
	}
	return out
}

// promiseTexts are the texts of the promise records of a log, in order.
func promiseTexts(t *testing.T, log []byte) []string {
	t.Helper()
	var out []string
	for _, line := range bytes.Split(bytes.TrimSuffix(log, []byte{'\n'}), []byte{'\n'}) {
		var rec struct{ Type, Promise string }
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec.Type == "promise" {
			out = append(out, rec.Promise)
		}
	}
	return out
}

func sessionLog(t *testing.T, root, tenant, session string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "sessions", tenant, session, "log.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A ledger backed up while tally serve writes it: the backup verifies, its
// sessions are cuts of the live logs that hold every write acknowledged
// before it began, and it restores into a new ledger that verifies, each
// session at the sequence restore prints.
func TestE2EBackupWhileServing(t *testing.T) {
	l := newLedger(t)
	url, _ := serveOn(t, io.Discard, "--dir", l.dir, "--insecure-dev")
	addr := strings.TrimPrefix(url, "http://")
	sessions := []string{"s0", "s1"}
	var (
		mu    sync.Mutex
		acked = map[string][]string{}
		total atomic.Int64
		stop  atomic.Bool
		wg    sync.WaitGroup
	)
	deadline := time.Now().Add(60 * time.Second)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			session := sessions[w%2]
			for j := 0; !stop.Load() && time.Now().Before(deadline); j++ {
				text := fmt.Sprintf("w%d-%d", w, j)
				code, resp, ok := declare(addr, session, fmt.Sprintf("k-%d-%d", w, j), fmt.Sprintf(`{"promise":%q,"to":"bob","until":"2h"}`, text))
				if !ok || code != 201 {
					t.Errorf("write %s: %d %s", text, code, resp)
					return
				}
				mu.Lock()
				acked[session] = append(acked[session], text)
				mu.Unlock()
				total.Add(1)
			}
		}(w)
	}
	waitUntil(t, "40 writes acknowledged", 30*time.Second, func() bool { return total.Load() >= 40 || t.Failed() })
	mu.Lock()
	before := map[string][]string{}
	for s, texts := range acked {
		before[s] = append([]string(nil), texts...)
	}
	mu.Unlock()
	file := filepath.Join(t.TempDir(), "ledger.backup")
	r := l.run("backup", "--to", file, "--json")
	atBackup := total.Load()
	waitUntil(t, "20 more writes after the backup", 30*time.Second, func() bool { return total.Load() >= atBackup+20 || t.Failed() })
	stop.Store(true)
	wg.Wait()
	if r.code != 0 {
		t.Fatalf("backup: %v", r)
	}
	taken := readBackupDoc(t, r)

	v := run(t, runOpts{}, "backup", "verify", file, "--json")
	if v.code != 0 || readBackupDoc(t, v).Digest != taken.Digest {
		t.Fatalf("verify: %v", v)
	}
	into := filepath.Join(t.TempDir(), "restored")
	rs := run(t, runOpts{}, "restore", file, "--dir", into, "--json")
	if rs.code != 0 {
		t.Fatalf("restore: %v", rs)
	}
	restored := readBackupDoc(t, rs)
	if fmt.Sprint(restored.seqs()) != fmt.Sprint(taken.seqs()) {
		t.Fatalf("restored to %v, backed up %v", restored.seqs(), taken.seqs())
	}
	if r := run(t, runOpts{}, "verify", "--dir", into); r.code != 0 {
		t.Fatalf("verify the restored ledger: %v", r)
	}
	for _, s := range sessions {
		got := sessionLog(t, into, "acme", s)
		live := sessionLog(t, l.dir, "acme", s)
		if !bytes.HasPrefix(live, got) || len(got) == len(live) {
			t.Fatalf("session %s: the restored log (%d bytes) is not a cut of the live one (%d bytes)", s, len(got), len(live))
		}
		if lines := uint64(bytes.Count(got, []byte{'\n'})); lines != taken.seqs()["acme/"+s] {
			t.Fatalf("session %s: %d lines restored, the backup printed seq %d", s, lines, taken.seqs()["acme/"+s])
		}
		count := map[string]int{}
		for _, text := range promiseTexts(t, got) {
			count[text]++
		}
		for _, text := range before[s] {
			if count[text] != 1 {
				t.Errorf("session %s: %q, acknowledged before the backup, is restored %d times", s, text, count[text])
			}
		}
		t.Logf("session %s: %d writes acknowledged before the backup, %d restored, %d in the live log", s, len(before[s]), len(count), len(promiseTexts(t, live)))
	}
}

// Bad input is refused, naming the field and the rule: exit 2 for usage,
// 1 for a refusal, and nothing written.
func TestE2EBackupRefusals(t *testing.T) {
	l := newLedger(t)
	l.must("promise", "one", "--to", "bob", "--until", "2h", "--as", "alice")
	dir := t.TempDir()
	file := filepath.Join(dir, "ledger.backup")
	l.must("backup", "--to", file)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	damaged := bytes.Clone(good)
	damaged[bytes.Index(damaged, []byte(`"one"`))+1] = 'X'
	damagedFile := filepath.Join(dir, "damaged.backup")
	os.WriteFile(damagedFile, damaged, 0o644)
	cutFile := filepath.Join(dir, "cut.backup")
	os.WriteFile(cutFile, good[:len(good)-40], 0o644)
	full := filepath.Join(dir, "full")
	os.MkdirAll(full, 0o755)
	os.WriteFile(filepath.Join(full, "keep"), []byte("mine"), 0o644)
	url, _ := serveOn(t, io.Discard, "--dir", newLedger(t).dir, "--insecure-dev")
	target := filepath.Join(dir, "target")

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no --to", []string{"--dir", l.dir, "backup"}, 2, "to: required"},
		{"an existing file", []string{"--dir", l.dir, "backup", "--to", file}, 1, "exists: a backup never replaces a file"},
		{"a ledger and a node", []string{"--dir", l.dir, "backup", "--to", target, "--node", "127.0.0.1:1"}, 2, "dir, node: give one"},
		{"a node without a secret", []string{"backup", "--to", target, "--node", "127.0.0.1:1"}, 2, "join-secret: required"},
		{"tally serve is not a cluster node", []string{"backup", "--to", target, "--node", url, "--join-secret", "0123456789abcdef"}, 1, "is not a cluster node"},
		{"verify a missing file", []string{"backup", "verify", filepath.Join(dir, "missing")}, 1, "no such file"},
		{"verify a damaged file", []string{"backup", "verify", damagedFile}, 1, "backup file damaged: session default/default"},
		{"verify a file cut short", []string{"backup", "verify", cutFile}, 1, "cut short"},
		{"restore a missing file", []string{"restore", filepath.Join(dir, "missing"), "--dir", target}, 1, "no such file"},
		{"restore a damaged file", []string{"restore", damagedFile, "--dir", target}, 1, "line 1: chain hash does not match"},
		{"restore a file cut short", []string{"restore", cutFile, "--data", target}, 1, "cut short"},
		{"restore nowhere", []string{"restore", file}, 2, "dir, data: give one"},
		{"restore into both", []string{"restore", file, "--dir", target, "--data", target + "2"}, 2, "dir, data: give one"},
		{"cluster flags on a ledger", []string{"restore", file, "--dir", target, "--node-id", "3"}, 2, "only with --data"},
		{"restore from standard input", []string{"restore", "-", "--dir", target}, 2, "not standard input"},
		{"restore over a directory", []string{"restore", file, "--dir", full}, 1, "is not empty"},
		{"restore over a node", []string{"restore", file, "--data", full}, 1, "data: " + full + " is not empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := run(t, runOpts{}, c.args...)
			if r.code != c.code || !strings.Contains(r.err, c.want) {
				t.Fatalf("want exit %d naming %q: %v", c.code, c.want, r)
			}
			if _, err := os.Stat(target); !os.IsNotExist(err) {
				t.Fatalf("%s was written: %v", target, err)
			}
		})
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, good) {
		t.Fatal("the existing backup file changed")
	}
	if ents, _ := os.ReadDir(full); len(ents) != 1 {
		t.Fatalf("the non-empty directory holds %d entries", len(ents))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 4 {
		t.Fatalf("a partial file was left: %v", ents)
	}
}
