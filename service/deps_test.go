package service

import (
	"os/exec"
	"strings"
	"testing"
)

// The seam and the REST client compile no storage: service holds the
// interface and its documents, so it imports no ledger, store, artifact
// or net/http (a refusal's HTTP status belongs to the HTTP binding, rest);
// the client speaks HTTP itself but never compiles the storage engine.
func TestSeamCompilesNoStorage(t *testing.T) {
	for _, c := range []struct {
		pkg       string
		forbidden []string
	}{
		{"tally/service", []string{"tally/ledger", "tally/ledgerservice", "tally/store", "tally/artifact", "net/http"}},
		{"tally/client", []string{"tally/ledger", "tally/ledgerservice", "tally/store", "tally/artifact"}},
		// The timekeeper asks the Service (Timekeeping) for what it reads
		// and commits.
		{"tally/timekeeper", []string{"tally/ledger", "tally/ledgerservice", "tally/store"}},
	} {
		out, err := exec.Command("go", "list", "-deps", c.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", c.pkg, err, out)
		}
		deps := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			deps[p] = true
		}
		if !deps[c.pkg] {
			t.Fatalf("go list -deps %s does not name the package itself:\n%s", c.pkg, out)
		}
		for _, f := range c.forbidden {
			if deps[f] {
				t.Errorf("%s imports %s (go list -deps %s)", c.pkg, f, c.pkg)
			}
		}
	}
}
