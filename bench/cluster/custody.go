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
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"tally/bench/internal/benchproc"
	"tally/cluster"
	"tally/cluster/replica"
	"tally/internal/dirbytes"
)

// custodyClaim is the claim each round publishes to: C<round>.
func custodyClaim(id string) string {
	return `{"claim":"` + id + `","respondent":"parser","work":"w","slots":[{"name":"change","mode":"required","checks":[{"id":"behavior","validator":{"name":"command","version":"1"},"evaluator":"maintainer","mode":"required","attempts":2}]}]}`
}

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

// openClaim creates, posts and receipts claim id through addr.
func openClaim(bin, addr, work, id string) error {
	for _, step := range [][]string{
		{"claim", "create", "-", "--as", "maintainer"},
		{"claim", "post", id, "--as", "maintainer"},
		{"receipt", "acquire", id, "--as", "parser"},
	} {
		stdin := ""
		if step[1] == "create" {
			stdin = custodyClaim(id)
		}
		if err := tallyAt(bin, addr, work, stdin, step...); err != nil {
			return err
		}
	}
	return nil
}

// putArtifact publishes file as claim id's patch-a through addr.
func putArtifact(bin, addr, work, id, file string) error {
	return tallyAt(bin, addr, work, "", "artifact", "put", file, "--claim", id, "--slot", "change", "--generation", "1", "--id", "patch-a", "--as", "parser")
}

// custodyWhole reports whether claim id's patch-a has every voter's receipt,
// as the node at addr shows the claim.
func custodyWhole(addr, id string) bool {
	res, err := client.Get("http://" + addr + "/v1/tenants/acme/sessions/parser/claims/" + id)
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
func treeSize(dir string) int64 { return dirbytes.Of(dir) }

// randomFile writes size bytes from seed to path.
func randomFile(path string, size int64, seed byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.CopyN(f, rand.NewChaCha8([32]byte{seed}), size)
	return errors.Join(err, f.Close())
}

func custodyBench(bin string, size int64, rounds int) error {
	dir, err := os.MkdirTemp("", "tally-custody-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	single := &proc{addr: benchproc.FreePort()}
	single.args = []string{"serve", "--insecure-dev", "--dir", filepath.Join(dir, "single"), "--addr", single.addr, "--watch-every", "0"}
	if err := single.start(bin); err != nil {
		return err
	}
	defer single.stop()
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
	mb := float64(size) / 1e6
	fmt.Printf("artifact: %d bytes (%.0f MB) a round, new bytes each round; 3 nodes through node %d (group %d's leader is node %d)\n", size, mb, asked.id, g, leader)
	fmt.Println("round  one node put  3 nodes committed  3 nodes full custody  ratio  raft bytes per artifact byte")
	var ratios, perByte []float64
	for r := 1; r <= rounds; r++ {
		id := fmt.Sprintf("C%d", r)
		file := fmt.Sprintf("patch%d.bin", r)
		if err := randomFile(filepath.Join(work, file), size, byte(r)); err != nil {
			return err
		}
		if err := openClaim(bin, single.addr, work, id); err != nil {
			return err
		}
		if err := openClaim(bin, asked.addr, work, id); err != nil {
			return err
		}
		start := time.Now()
		if err := putArtifact(bin, single.addr, work, id, file); err != nil {
			return err
		}
		one := time.Since(start)
		before := make([]int64, len(nodes))
		for i, n := range nodes {
			before[i] = treeSize(filepath.Join(n.data, "raft"))
		}
		start = time.Now()
		if err := putArtifact(bin, asked.addr, work, id, file); err != nil {
			return err
		}
		committed := time.Since(start)
		for !custodyWhole(asked.addr, id) {
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
		ratios = append(ratios, one.Seconds()/whole.Seconds())
		perByte = append(perByte, float64(grew)/float64(size))
		fmt.Printf("%5d  %7.0f ms %4.0f MB/s  %7.0f ms  %7.0f ms %4.0f MB/s  %.2fx  %.6f (%d bytes)\n", r, ms(one), mb/one.Seconds(), ms(committed), ms(whole), mb/whole.Seconds(), ratios[len(ratios)-1], perByte[len(perByte)-1], grew)
		os.Remove(filepath.Join(work, file))
	}
	slices.Sort(ratios)
	slices.Sort(perByte)
	fmt.Printf("median ratio (3 nodes until full custody / one node): %.2fx (want >= 0.3x); median raft bytes per artifact byte: %.6f (want <= 0.001)\n", ratios[len(ratios)/2], perByte[len(perByte)/2])
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
