// Package sessionname holds the shape of tenant and session names: in a
// path of the REST API, in a cluster's directory, and as directories of a
// ledger, so every binding checks them alike and none needs the store to
// do it. It imports only fmt.
package sessionname

import "fmt"

// DefaultTenant and DefaultSession name the session the CLI uses.
const (
	DefaultTenant  = "default"
	DefaultSession = "default"
)

// Check enforces the shape of tenant and session names: 1–64 of
// letters, digits, '.', '_' and '-', not starting with a punctuation mark,
// so a name can never climb out of the ledger directory.
func Check(field, name string) error {
	if !validName(name) {
		return fmt.Errorf("%s: must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", field)
	}
	return nil
}

// validName is ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ written out: that
// expression compiles to 64 nested states, which cost every process
// ~900 allocations at start as a package variable.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case (c == '.' || c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}
