package vocab

import "tally/sessionname"

// Tenant and session names are sessionname's; these keep code written
// against the old names compiling until it moves.
const (
	// Deprecated: use sessionname.DefaultTenant.
	DefaultTenant = sessionname.DefaultTenant
	// Deprecated: use sessionname.DefaultSession.
	DefaultSession = sessionname.DefaultSession
)

// CheckName is sessionname.Check.
//
// Deprecated: use sessionname.Check.
func CheckName(field, name string) error { return sessionname.Check(field, name) }
