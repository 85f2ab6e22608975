package claim

import (
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"
)

// TestImportsNoIO keeps the claim core pure: it imports the digest code, never
// the artifact store or another package that does I/O.
func TestImportsNoIO(t *testing.T) {
	refused := map[string]bool{"tally/artifact": true, "tally/store": true, "tally/ledger": true,
		"os": true, "net": true, "net/http": true, "io/fs": true, "os/exec": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if filepath.Ext(name) != ".go" || len(name) > 8 && name[len(name)-8:] == "_test.go" {
			continue
		}
		f, err := goparser.ParseFile(token.NewFileSet(), name, nil, goparser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); refused[p] {
				t.Errorf("%s imports %s, which does I/O", name, p)
			}
		}
	}
}
