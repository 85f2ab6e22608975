// Package vocab holds the refusals every core returns (refusal.go) and the
// names every layer must spell alike: the timekeeper's default identity
// and the A2A extension URIs. Tenant and session names are sessionname's. The
// values are stored in logs and sent on the wire: do not change them. The
// shape of a family's core is family's.
//
// Ids are plain strings (a record's sequence a uint64): the typed ids it
// once declared were converted at every use and checked nothing.
//
// The characters a record may not hold are textcheck's. The package does
// no I/O and imports only errors and fmt.
package vocab
