package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkReads runs the read verbs in process on a ledger of 10,000 open
// promises (one import), the ledger opened from its checkpoint each time
// as a new process would: per op the verb's whole work, printing included,
// and its allocations.
//
//	go test ./cli -run '^$' -bench '^BenchmarkReads$' -benchmem
func BenchmarkReads(b *testing.B) {
	run := ledger10k(b)
	const now = "--now=2026-09-15T00:00:00Z"
	for _, bc := range []struct {
		name string
		args []string
	}{
		{"ls-json", []string{"ls", "--json", now}},
		{"ls-text", []string{"ls", now}},
		{"ls-all-json", []string{"ls", "--all", "--json", now}},
		{"show-text", []string{"show", "pnk_005000", now}},
		{"owed-text", []string{"owed", "--as", "team-03/agent-003", now}},
		{"graph-text", []string{"graph", now}},
		{"export-states", []string{"export", "--format", "json"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			size := len(run(bc.args...))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				run(bc.args...)
			}
			b.ReportMetric(float64(size), "out-bytes")
		})
	}
}

// BenchmarkAppendOn10k is one `tally promise` in process on a ledger of
// 10,000 promises: the open from its checkpoint, the decision, the
// durable append, as a process pays them.
//
//	go test ./cli -run '^$' -bench '^BenchmarkAppendOn10k$' -benchmem
func BenchmarkAppendOn10k(b *testing.B) {
	run := ledger10k(b)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		run("--as", "team-01/agent-001", "promise", "hand back a reviewed schema", "--to", "team-02/author-002", "--until", "2026-12-01T00:00:00Z")
	}
}

// ledger10k makes a ledger of 10,000 open promises (one import, then a
// read that leaves a checkpoint) and returns a runner of verbs on it.
func ledger10k(b *testing.B) func(args ...string) []byte {
	const n = 10000
	dir := b.TempDir()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, `{"id":"pnk_%06d","ts":"2026-09-01T00:00:00Z","type":"promise","promise":"hand back a reviewed schema for ticket %d","by":"team-%02d/agent-%03d","to":"team-%02d/author-%03d","until":"2026-10-%02dT00:00:00Z"}`+"\n",
			i, i, i%20, i%300, (i+7)%20, (i*7)%300, 2+i%27)
	}
	file := filepath.Join(dir, "p.jsonl")
	if err := os.WriteFile(file, []byte(lines.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	root := filepath.Join(dir, "ledger")
	run := func(args ...string) []byte {
		var out, errb bytes.Buffer
		if code := Main(append([]string{"--dir", root}, args...), testStreams(&out, &errb, nil)); code != ExitOK {
			b.Fatalf("%q: exit %d: %s", args, code, errb.String())
		}
		return out.Bytes()
	}
	run("init")
	run("import", file)
	run("ls") // leaves a checkpoint
	return run
}
