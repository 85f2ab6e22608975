package main

// The custody of a single server's content store: the scrubber finds a
// copy corrupted on disk (counted in /metrics) and the copy is never
// served; a refused publication's bytes are collected after the grace;
// `artifact verify --store` and `artifact collect` do the same on demand.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/artifact"
	"tally/digest"
)

// custodyClaim has maintainer issue C17 to parser, who receives it.
func custodyClaim(t *testing.T, as func(who string, args ...string) result) {
	t.Helper()
	for _, st := range []struct {
		who  string
		args []string
	}{
		{"maintainer", []string{"claim", "create", "C17", "--respondent", "parser", "--work", "w", "--check", "change/behavior:validator=command@1,evaluator=maintainer"}},
		{"maintainer", []string{"claim", "post", "C17"}},
		{"parser", []string{"receipt", "acquire", "C17"}},
	} {
		if r := as(st.who, st.args...); r.code != 0 {
			t.Fatalf("%v: %v", st.args, r)
		}
	}
}

// awaitMetric polls url's /metrics until name's value satisfies ok, or
// fails after ten seconds.
func awaitMetric(t *testing.T, url, name string, ok func(float64) bool) float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var v float64
		text, err := metricsText(url)
		if err == nil {
			var found bool
			if v, found = sampleSum(text, name, ""); found && ok(v) {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s stayed at %v", name, v)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func writeBytes(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestServeScrubFindsACorruptedCopyThatIsNeverServed(t *testing.T) {
	srv := startServerWith(t, []string{"--scrub-rate", "64MiB/s", "--scrub-every", "100ms"}, "maintainer", "parser")
	custodyClaim(t, func(who string, args ...string) result { return srv.as(t, who, args...) })
	work := t.TempDir()
	patch := "--- a/parser.go\n+++ b/parser.go\n+\tif len(s) < 6 { return errIncomplete }\n"
	writeBytes(t, filepath.Join(work, "fix.patch"), patch)
	if r := srv.as(t, "parser", "artifact", "put", filepath.Join(work, "fix.patch"), "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a"); r.code != 0 {
		t.Fatal(r)
	}
	obj := artifact.ObjectPath(filepath.Join(srv.dir, "objects"), digest.HashContent([]byte(patch)))
	writeBytes(t, obj, strings.Replace(patch, "6", "7", 1)) // the disk rots one byte
	awaitMetric(t, srv.url, "tally_artifact_damaged_found_total", func(v float64) bool { return v >= 1 })
	if v := awaitMetric(t, srv.url, "tally_artifact_scrubbed_bytes_total", func(v float64) bool { return v > 0 }); v < float64(len(patch)) {
		t.Fatalf("scrubbed %v bytes", v)
	}
	out := filepath.Join(work, "got.patch")
	r := srv.as(t, "parser", "artifact", "get", "patch-a", "--claim", "C17", "-o", out)
	if r.code != 1 || !strings.Contains(r.err, "the stored copy of artifact patch-a is damaged") {
		t.Fatalf("get of a damaged copy: %v", r)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a damaged copy was written: %v", err)
	}
	// On demand, every object of the directory.
	r = srv.local(t, "artifact", "verify", "--store")
	if r.code != 1 || !strings.Contains(r.out, digest.HashContent([]byte(patch)).String()) || !strings.Contains(r.out, "damaged") || !strings.Contains(r.err, "1 object(s) checked, 1 damaged") {
		t.Fatalf("verify --store: %v", r)
	}
	r = srv.as(t, "parser", "artifact", "verify", "--store")
	if r.code != 2 || !strings.Contains(r.err, "store: --store re-hashes a local directory's content store") {
		t.Fatalf("verify --store through the server: %v", r)
	}
}

func TestServeCollectsARefusedPublicationsBytesAfterTheGrace(t *testing.T) {
	srv := startServerWith(t, []string{"--collect-grace", "0s", "--collect-every", "100ms"}, "maintainer", "parser")
	custodyClaim(t, func(who string, args ...string) result { return srv.as(t, who, args...) })
	work := t.TempDir()
	kept, refused := "the patch C17 records\n", "bytes of a publication to a claim that does not exist\n"
	writeBytes(t, filepath.Join(work, "kept.patch"), kept)
	writeBytes(t, filepath.Join(work, "refused.patch"), refused)
	if r := srv.as(t, "parser", "artifact", "put", filepath.Join(work, "kept.patch"), "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a"); r.code != 0 {
		t.Fatal(r)
	}
	if r := srv.as(t, "parser", "artifact", "put", filepath.Join(work, "refused.patch"), "--claim", "C99", "--id", "lost"); r.code != 1 {
		t.Fatalf("publish to no claim: %v", r)
	}
	objs := filepath.Join(srv.dir, "objects")
	awaitMetric(t, srv.url, "tally_artifact_collected_bytes_total", func(v float64) bool { return v >= float64(len(refused)) })
	if _, err := os.Stat(artifact.ObjectPath(objs, digest.HashContent([]byte(refused)))); !os.IsNotExist(err) {
		t.Fatalf("the refused publication's bytes: %v", err)
	}
	if r := srv.as(t, "maintainer", "artifact", "verify", "patch-a", "--claim", "C17"); r.code != 0 {
		t.Fatalf("the referenced bytes after a collection: %v", r)
	}
}

func TestArtifactCollectOnALocalLedger(t *testing.T) {
	l := newLedger(t)
	custodyClaim(t, func(who string, args ...string) result { return l.run(append([]string{"--as", who}, args...)...) })
	writeBytes(t, filepath.Join(l.dir, "..", "lost.patch"), "never recorded\n")
	if r := l.run("--as", "parser", "artifact", "put", filepath.Join(l.dir, "..", "lost.patch"), "--claim", "C99", "--id", "lost"); r.code != 1 {
		t.Fatalf("publish to no claim: %v", r)
	}
	// Within the grace nothing goes; past it the unreferenced bytes do.
	if out := l.must("artifact", "collect"); out != "0 object(s) and 0 staged file(s) collected, 0 bytes\n" {
		t.Fatalf("collect within the grace: %q", out)
	}
	lost := digest.HashContent([]byte("never recorded\n"))
	want := "collected " + lost.String() + " (15 bytes)\n1 object(s) and 0 staged file(s) collected, 15 bytes\n"
	if out := l.must("artifact", "collect", "--grace", "0s"); out != want {
		t.Fatalf("collect: %q, want %q", out, want)
	}
	if r := l.run("artifact", "verify", "--store"); r.code != 0 || strings.Contains(r.out, lost.String()) {
		t.Fatalf("verify --store after: %v", r)
	}
}

// An upload abandoned mid-stream (the process killed while it staged the
// bytes) leaves a staging file, which a collection past the grace removes.
func TestArtifactCollectRemovesAnAbandonedUpload(t *testing.T) {
	l := newLedger(t)
	staging := filepath.Join(l.dir, "objects", "tmp")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		t.Fatal(err)
	}
	abandoned := filepath.Join(staging, "put-abandoned")
	writeBytes(t, abandoned, "the first half of an upload cut by a kill -9\n")
	if out := l.must("artifact", "collect"); out != "0 object(s) and 0 staged file(s) collected, 0 bytes\n" {
		t.Fatalf("collect within the grace: %q", out)
	}
	if out := l.must("artifact", "collect", "--grace", "0s"); out != "0 object(s) and 1 staged file(s) collected, 45 bytes\n" {
		t.Fatalf("collect: %q", out)
	}
	if _, err := os.Stat(abandoned); !os.IsNotExist(err) {
		t.Fatalf("the abandoned upload: %v", err)
	}
}
