package main

// -custody: an artifact's bytes beside the raft log. The same bytes are
// published with `tally artifact put` through one node of a 3-node cluster
// that does not lead the session's group, timed until every voter holds a
// custody receipt (the claim's custody shows no node missing), and through
// a single server, timed until the put returns; and the raft stores'
// growth is divided by the artifact's bytes.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"tally/cluster"
	"tally/cluster/replica"
)

const custodyClaim = `{"claim":"C17","respondent":"parser","work":"w","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","attempts":2}]}]}`

// tallyAt runs a verb of session acme/parser through the server at addr.
func tallyAt(bin, addr, work, stdin string, args ...string) error {
	cmd := exec.Command(bin, append(args, "--session", "acme/parser")...)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "TALLY_URL=http://"+addr)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("tally %v: %v: %s", args, err, out)
	}
	return nil
}

// openClaim creates, posts and receipts C17 through addr.
func openClaim(bin, addr, work string) error {
	for _, step := range [][]string{
		{"claim", "create", "-", "--as", "maintainer"},
		{"claim", "post", "C17", "--as", "maintainer"},
		{"receipt", "acquire", "C17", "--as", "parser"},
	} {
		stdin := ""
		if step[1] == "create" {
			stdin = custodyClaim
		}
		if err := tallyAt(bin, addr, work, stdin, step...); err != nil {
			return err
		}
	}
	return nil
}

// putArtifact publishes work/patch.bin as C17's patch-a through addr.
func putArtifact(bin, addr, work string) error {
	return tallyAt(bin, addr, work, "", "artifact", "put", "patch.bin", "--claim", "C17", "--slot", "change", "--generation", "1", "--id", "patch-a", "--as", "parser")
}

// custodyWhole reports whether C17's patch-a has every voter's receipt,
// as the node at addr shows the claim.
func custodyWhole(addr string) bool {
	res, err := client.Get("http://" + addr + "/v1/tenants/acme/sessions/parser/claims/C17")
	if err != nil {
		return false
	}
	defer res.Body.Close()
	var doc struct {
		Custody []struct {
			Holders []uint64 `json:"holders"`
			Missing []uint64 `json:"missing"`
		} `json:"custody"`
	}
	if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&doc) != nil || len(doc.Custody) == 0 {
		return false
	}
	return len(doc.Custody[0].Missing) == 0 && len(doc.Custody[0].Holders) == 3
}

// treeSize is the bytes of the files under dir.
func treeSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func custodyBench(bin string, size int64) error {
	dir, err := os.MkdirTemp("", "tally-custody-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(work, "patch.bin"))
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, rand.NewChaCha8([32]byte{24}), size)
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}

	// One node: a single server.
	single := &proc{addr: freePort()}
	single.args = []string{"serve", "--insecure-dev", "--dir", filepath.Join(dir, "single"), "--addr", single.addr, "--watch-every", "0"}
	if err := single.start(bin); err != nil {
		return err
	}
	err = openClaim(bin, single.addr, work)
	start := time.Now()
	if err == nil {
		err = putArtifact(bin, single.addr, work)
	}
	one := time.Since(start)
	single.stop()
	if err != nil {
		return err
	}

	// Three nodes, through a follower, until custody is whole.
	nodes, err := startCluster(bin, dir, "custody")
	if err != nil {
		return err
	}
	defer stopAll(nodes)
	g := replica.GroupOf(cluster.DefaultGroups, "acme", "parser")
	st, err := status(nodes[0].addr)
	if err != nil {
		return err
	}
	var leader uint64
	for _, gs := range st.Groups {
		if gs.Group == g {
			leader = gs.Leader
		}
	}
	asked := nodes[leader%3] // ids 1..3: the node after the leader
	if err := openClaim(bin, asked.addr, work); err != nil {
		return err
	}
	before := make([]int64, len(nodes))
	for i, n := range nodes {
		before[i] = treeSize(filepath.Join(n.data, "raft"))
	}
	start = time.Now()
	if err := putArtifact(bin, asked.addr, work); err != nil {
		return err
	}
	committed := time.Since(start)
	for !custodyWhole(asked.addr) {
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("custody not whole after %v", time.Since(start))
		}
		time.Sleep(10 * time.Millisecond)
	}
	whole := time.Since(start)
	var grew int64
	for i, n := range nodes {
		grew = max(grew, treeSize(filepath.Join(n.data, "raft"))-before[i])
	}
	mb := float64(size) / 1e6
	fmt.Printf("artifact: %d bytes (%.0f MB)\n", size, mb)
	fmt.Printf("one node, tally artifact put:                %8.0f ms  %7.1f MB/s\n", ms(one), mb/one.Seconds())
	fmt.Printf("3 nodes through node %d (a follower), committed: %5.0f ms\n", asked.id, ms(committed))
	fmt.Printf("3 nodes through node %d, custody whole on 3:  %8.0f ms  %7.1f MB/s\n", asked.id, ms(whole), mb/whole.Seconds())
	fmt.Printf("throughput ratio (3 nodes until full custody / one node): %.2fx (want >= 0.3x)\n", one.Seconds()/whole.Seconds())
	fmt.Printf("raft store growth, the most of the 3 nodes: %d bytes; per artifact byte: %.6f (want <= 0.001)\n", grew, float64(grew)/float64(size))
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
