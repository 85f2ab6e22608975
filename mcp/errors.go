package mcp

import (
	"errors"

	"tally/jsondoc"
	"tally/ledger"
	"tally/rule"
)

// errNotFound answers a caller that names another tenant's session: what
// REST answers a foreign tenant's path, so it learns nothing of it.
var errNotFound = rule.NotFoundf("session", "not found")

// errorDocument is the error document of err, as the CLI's --json prints
// it.
func errorDocument(err error) []byte {
	code := "error"
	var ie *ledger.IdempotencyError
	if r, ok := rule.As(err); ok {
		code = string(r.Code)
	} else if errors.As(err, &ie) {
		code = ie.Code
	}
	return jsondoc.Error(err.Error(), code)
}

// noSession reports a read of a session that has no log yet: nothing is
// owed there.
func noSession(err error) bool {
	r, ok := rule.As(err)
	return ok && r.Code == "NoSuchSession"
}
