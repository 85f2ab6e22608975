package mcp

import (
	"tally/refuse"
	"tally/rest"
)

// errNotFound answers a caller that names another tenant's session: what
// REST answers a foreign tenant's path, so it learns nothing of it.
var errNotFound = refuse.NotFoundf("session", "not found")

// errorDocument is the error document of err: what REST answers and the
// CLI's --json prints for it (rest.Refuse, the one mapping), or the
// server's own document when err came back from one.
func errorDocument(err error) []byte { return rest.Refuse(err).Document }
