package main

// An artifact's bytes beside the raft log, on three processes: a large
// artifact published through a follower grows no raft store by more than
// a small part of it, and every voter fetches, verifies and receipts its
// copy; the node asked never holds it whole in memory; a copy corrupted on
// one node's disk is never served, is found by its scrubber and repaired
// from another node; a refused publication's bytes are collected after
// the grace. 20 MB by default; TALLY_E2E_BIG=1 publishes 200 MB.

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"tally/digest"
	"tally/internal/dirbytes"
)

// writeRandom writes size pseudo-random bytes to path and returns their
// content digest.
func writeRandom(t *testing.T, path string, size int64) string {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := digest.NewContentHasher()
	rng := rand.NewChaCha8([32]byte{24})
	buf := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(buf)) {
		p := buf[:min(int64(len(buf)), left)]
		rng.Read(p)
		h.Write(p)
		if _, err := f.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	return digest.ContentSum(h).String()
}

// hashFile is the content digest of the file at path ("" if unreadable).
func hashFile(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	h := digest.NewContentHasher()
	if _, err := io.Copy(h, f); err != nil {
		return ""
	}
	return digest.ContentSum(h).String()
}

// treeBytes is the bytes of the files under dir.
func treeBytes(t *testing.T, dir string) int64 { return dirbytes.Of(dir) }

// peakRSS is the process's peak resident memory (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	m := regexp.MustCompile(`VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		t.Skip("no VmHWM in /proc/pid/status")
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

func (n *cnode) objectPath(content string) string {
	return filepath.Join(n.data, "ledger", "objects", content[:2], content[2:])
}

func TestClusterArtifactBytesBesideTheLog(t *testing.T) {
	size := int64(20 << 20)
	if os.Getenv("TALLY_E2E_BIG") != "" {
		size = 200 << 20
	}
	nodes := startClusterWith(t, t.TempDir(), func(n *cnode) {
		n.extra = append(n.extra, "--scrub-every", "1s", "--scrub-rate", "512MiB/s", "--collect-grace", "2s", "--collect-every", "1s")
	})
	leader := parserLeader(t, nodes)
	asked := nodes[leader.id%3] // a follower of the session's group
	work := t.TempDir()
	content := writeRandom(t, filepath.Join(work, "patch.bin"), size)
	tally := func(n *cnode, stdin string, args ...string) string {
		t.Helper()
		return tallyThrough(t, n, work, stdin, args...)
	}
	takeC17(t, asked, work)

	raftBefore := make([]int64, len(nodes))
	for i, n := range nodes {
		raftBefore[i] = treeBytes(t, filepath.Join(n.data, "raft"))
	}
	rssBefore := peakRSS(t, asked.cmd.Process.Pid)
	start := time.Now()
	tally(asked, "", "artifact", "put", "patch.bin", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a", "--as", parser, "--request-id", "put")
	put := time.Since(start)
	tally(asked, "", "testament", "close", "C17", "--id", "T1", "--generation", "1", "--outcome", "complete", "--summary", "s",
		"--bind", "change=patch-a", "--as", parser, "--request-id", "close")
	tally(asked, "", "testament", "post", "C17", "T1", "--as", parser, "--request-id", "tpost")
	tally(asked, "", "testament", "receive", "C17", "T1", "--as", maintainer, "--request-id", "treceive")
	waitUntil(t, "every voter's custody receipt", 120*time.Second, func() bool {
		show := run(t, runOpts{env: []string{"TALLY_URL=" + asked.url()}}, "claim", "show", "C17", "--session", "acme/parser")
		return show.code == 0 && regexp.MustCompile(`patch-a +group \d+, epoch \d+ +held by node 1, 2, 3 +whole`).MatchString(show.out)
	})
	whole := time.Since(start)
	rssGrew := peakRSS(t, asked.cmd.Process.Pid) - rssBefore
	t.Logf("%d MB through node %d: committed in %v, custody whole on 3 nodes in %v; the node's peak RSS grew by %d MB",
		size>>20, asked.id, put.Round(time.Millisecond), whole.Round(time.Millisecond), rssGrew>>20)
	if rssGrew > size/2 && rssGrew > 64<<20 {
		t.Errorf("the node asked grew its peak RSS by %d bytes for an upload of %d: held in memory", rssGrew, size)
	}
	for i, n := range nodes {
		grew := treeBytes(t, filepath.Join(n.data, "raft")) - raftBefore[i]
		t.Logf("node %d: raft store grew by %d bytes (%.5f of the artifact)", n.id, grew, float64(grew)/float64(size))
		if grew > size/10 {
			t.Errorf("node %d's raft store grew by %d bytes for an artifact of %d", n.id, grew, size)
		}
		if got := hashFile(n.objectPath(content)); got != content {
			t.Errorf("node %d holds %q for content %s", n.id, got, content)
		}
	}

	// A copy corrupted on one node's disk: never served, found by the
	// scrubber, repaired from another node's copy.
	bad := nodes[(leader.id+1)%3]
	f, err := os.OpenFile(bad.objectPath(content), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("rot"), size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitUntil(t, fmt.Sprintf("node %d's scrubber finding the damaged copy", bad.id), 60*time.Second, func() bool {
		res, err := httpc.Get(bad.url() + "/metrics")
		if err != nil {
			return false
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return regexp.MustCompile(`(?m)^tally_artifact_damaged_found_total [1-9]`).Match(b)
	})
	req, _ := http.NewRequest("GET", bad.url()+"/v1/tenants/acme/sessions/parser/claims/C17/artifacts/patch-a", nil)
	req.Header.Set("X-Tally-Actor", maintainer)
	res, err := httpc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	h := digest.NewContentHasher()
	var head strings.Builder
	io.Copy(io.MultiWriter(h, &limitedWriter{&head, 512}), res.Body)
	res.Body.Close()
	if got := digest.ContentSum(h).String(); res.StatusCode == http.StatusOK && got != content {
		t.Fatalf("node %d served a damaged copy (content %s)", bad.id, got)
	}
	// Refused while damaged, or served whole once repaired.
	if res.StatusCode != http.StatusOK && !strings.Contains(head.String(), `"code":"damaged"`) {
		t.Fatalf("a read of the damaged copy through node %d: %d %s", bad.id, res.StatusCode, head.String())
	}
	waitUntil(t, fmt.Sprintf("node %d's copy repaired", bad.id), 120*time.Second, func() bool { return hashFile(bad.objectPath(content)) == content })
	waitUntil(t, "custody whole again", 60*time.Second, func() bool {
		show := run(t, runOpts{env: []string{"TALLY_URL=" + bad.url()}}, "claim", "show", "C17", "--session", "acme/parser")
		return show.code == 0 && regexp.MustCompile(`patch-a +group \d+, epoch \d+ +held by node 1, 2, 3 +whole`).MatchString(show.out)
	})
	tally(asked, "", "check", "begin", "behavior", "--claim", "C17", "--artifact", "patch-a", "--as", maintainer, "--request-id", "begin")

	// A refused publication: its bytes stay at the node asked only until
	// a collection past the grace.
	refused := []byte("the bytes of a publication on a claim that does not exist\n")
	if err := os.WriteFile(filepath.Join(work, "refused.txt"), refused, 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, runOpts{cwd: work, env: []string{"TALLY_URL=" + asked.url()}}, "artifact", "put", "refused.txt", "--claim", "C99", "--slot", "change", "--generation", "1", "--id", "nope", "--as", parser, "--session", "acme/parser")
	if r.code == 0 || !strings.Contains(r.err, "C99") {
		t.Fatalf("a publication on an unknown claim: %v", r)
	}
	gone := digest.HashContent(refused).String()
	if _, err := os.Stat(asked.objectPath(gone)); err != nil {
		t.Fatalf("the refused bytes at node %d: %v", asked.id, err)
	}
	waitUntil(t, "the refused bytes collected", 30*time.Second, func() bool {
		_, err := os.Stat(asked.objectPath(gone))
		return os.IsNotExist(err)
	})
	for _, n := range nodes {
		if hashFile(n.objectPath(content)) != content {
			t.Errorf("node %d lost the recorded bytes", n.id)
		}
	}
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w *strings.Builder
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if keep := min(len(p), l.n-l.w.Len()); keep > 0 {
		l.w.Write(p[:keep])
	}
	return len(p), nil
}
