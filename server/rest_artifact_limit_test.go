package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"tally/auth"
	"tally/internal/proctest"
	"tally/store"
)

// claimToPublish makes claim C17 in the fixture's session, received by
// parser, so that parser may publish its artifacts.
func claimToPublish(f *fixture) { claimToPublishAs(f, "C17") }

// claimToPublishAs makes claim id (one required check, behavior, on slot
// change, evaluated by maintainer) in the fixture's session, posted and
// received by parser.
func claimToPublishAs(f *fixture, id string) {
	f.t.Helper()
	f.token("maintainer", auth.RoleAgent)
	f.token("parser", auth.RoleAgent)
	c := base + "/claims"
	f.want(201, "POST", c, "maintainer", `{"claim":"`+id+`","respondent":"parser","work":"w","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","phases":["programmatic"],"attempts":1}]}]}`)
	f.want(200, "POST", c+"/"+id+"/post", "maintainer", ``)
	f.want(200, "POST", c+"/"+id+"/receipt", "parser", `{}`)
}

// putStream PUTs body as artifact id of C17 as parser, declaring length
// when it is not negative (else chunked), and returns status and answer.
func putStream(f *fixture, id string, body io.Reader, length int64) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("PUT", f.ts.URL+base+"/claims/C17/artifacts/"+id+"?slot=change&generation=1&kind=patch", body)
	req.Header.Set("Authorization", "Bearer "+f.tokens["parser"])
	req.Header.Set("Content-Type", "application/octet-stream")
	if length >= 0 {
		req.ContentLength = length
	} else {
		req.ContentLength = -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// objectFiles lists the files under the content store, staging included.
func objectFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(store.ObjectsDir(root), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != "collect.lock" {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// onlyReader hides a reader's length, so the body goes chunked.
type onlyReader struct{ io.Reader }

func TestArtifactUploadsOverTheLimitAreRefusedAndLeaveNothing(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MaxArtifactBytes = 4096 })
	claimToPublish(f)
	before := f.logBytes()
	big := bytes.Repeat([]byte("x"), 64<<10)
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64
		msg    string
	}{
		{"declared", bytes.NewReader(big), int64(len(big)), "body: 65536 bytes declared, over this server's limit of 4096 bytes (4KiB, serve --max-artifact-bytes); nothing was stored"},
		{"streamed", onlyReader{bytes.NewReader(big)}, -1, "body: the bytes went past this server's limit of 4096 bytes (4KiB, serve --max-artifact-bytes); the stream was cut there and nothing of it was kept"},
	} {
		code, doc := putStream(f, "big-"+tc.name, tc.body, tc.length)
		var d struct {
			Error string `json:"error"`
			Code  string `json:"code"`
			Limit int64  `json:"limit"`
		}
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("%s: %d %s", tc.name, code, doc)
		}
		if code != 413 || d.Code != "ArtifactTooLarge" || d.Limit != 4096 || d.Error != tc.msg {
			t.Errorf("%s: %d %s", tc.name, code, doc)
		}
		if files := objectFiles(t, f.root); len(files) != 0 {
			t.Errorf("%s: the refused upload left %v", tc.name, files)
		}
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused upload was appended")
	}
	// At the limit, declared or not, the bytes are taken.
	if code, doc := putStream(f, "at-limit", bytes.NewReader(big[:4096]), 4096); code != 201 {
		t.Fatalf("at the limit: %d %s", code, doc)
	}
	if code, doc := putStream(f, "at-limit-streamed", onlyReader{bytes.NewReader(big[:4095])}, -1); code != 201 {
		t.Fatalf("under the limit, streamed: %d %s", code, doc)
	}
}

func TestDefaultArtifactLimitIsOneGiB(t *testing.T) {
	if got := DefaultConfig().MaxArtifactBytes; got != 1<<30 {
		t.Fatalf("MaxArtifactBytes = %d", got)
	}
	cfg := DefaultConfig()
	cfg.Root, cfg.MaxArtifactBytes = t.TempDir(), 0
	if err := cfg.Validate(); err == nil || err.Error() != "server config: MaxArtifactBytes 0 must be at least 1" {
		t.Fatalf("Validate: %v", err)
	}
}

// A disk that fills while an upload is staged refuses that upload (507),
// keeps nothing of it, and the server serves on. The content store is put
// on a small tmpfs, which needs the privilege to mount one.
func TestArtifactUploadOnAFullDiskIsRefusedAndTheServerServesOn(t *testing.T) {
	f := newFixture(t)
	proctest.Tmpfs(t, store.ObjectsDir(f.root), "256k")
	claimToPublish(f)
	before := f.logBytes()
	big := bytes.Repeat([]byte("y"), 1<<20)
	code, doc := putStream(f, "too-big-for-the-disk", bytes.NewReader(big), int64(len(big)))
	if code != 507 || !strings.Contains(doc, `"code":"InsufficientStorage"`) || !strings.Contains(doc, "filled while it staged the bytes: nothing of them was kept") {
		t.Fatalf("full disk: %d %s", code, doc)
	}
	if files := objectFiles(t, f.root); len(files) != 0 {
		t.Fatalf("the refused upload left %v", files)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a refused upload was appended")
	}
	if code, doc := putStream(f, "small", strings.NewReader("diff --git a b"), 14); code != 201 {
		t.Fatalf("after a full disk: %d %s", code, doc)
	}
}

// An upload whose body stops short of the length it declared (the
// connection closed mid-stream) is not taken: nothing of it is kept,
// nothing appended, and the same upload sent whole afterwards is taken.
func TestArtifactUploadShortOfItsDeclaredLengthLeavesNothing(t *testing.T) {
	f := newFixture(t)
	claimToPublish(f)
	before := f.logBytes()
	body := bytes.Repeat([]byte("z"), 64<<10)
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT %s/claims/C17/artifacts/short?slot=change&generation=1&kind=patch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n",
		base, f.tokens["parser"], len(body)+1000)
	conn.Write(body)
	conn.(*net.TCPConn).CloseWrite()
	answer, _ := io.ReadAll(conn) // the server may answer 400 or just close
	conn.Close()
	if strings.Contains(string(answer), " 201 ") {
		t.Fatalf("a body short of its length was taken: %s", answer)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(objectFiles(t, f.root)) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // the handler sees the end of the stream after the client does
	}
	if files := objectFiles(t, f.root); len(files) != 0 {
		t.Fatalf("the short upload left %v", files)
	}
	if !bytes.Equal(before, f.logBytes()) {
		t.Fatal("a short upload was appended")
	}
	if code, doc := putStream(f, "short", bytes.NewReader(body), int64(len(body))); code != 201 {
		t.Fatalf("sent whole: %d %s", code, doc)
	}
}
