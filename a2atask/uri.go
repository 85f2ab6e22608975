// Package a2atask maps tally's records and views to A2A v1.0 objects: the
// families' extension URIs and the metadata keys a record rides under, the
// task state each family's states map to, a task's status message and
// artifacts, the actions a record may name, the message a lapse goes back
// to its raising agent as, and the agent card that says all this to a
// client. It does no I/O. The server's A2A binding
// and the timekeeper's A2A sink both build their wire objects here, so the
// two cannot drift apart.
package a2atask

// Extension URIs of tally's own families: the A2A binding's defaults (its
// configuration may name others) and the one a lapse is sent under when
// neither the expectation nor the sink names one. Sent on the wire and named
// in agents' configurations: do not change them.
const (
	PromiseURI = "urn:tally:ext:promise"
	ClaimURI   = "urn:tally:ext:claim"
	ExpectURI  = "urn:tally:ext:expect"
)

// Extension URIs tally accepts besides its own.
const (
	// PinkiPromiseURI is pinki's promise extension; its records ride in
	// metadata["<URI>/promise"].
	PinkiPromiseURI = "https://github.com/azigler/pinki/ext/promise/v0"
	// ExpectationsDraftURI is the A2A expectations proposal's extension.
	ExpectationsDraftURI = "https://rsaxb.com/a2a/expectations/v1"
)

// Family is the tally family an extension URI carries.
type Family string

const (
	FamilyPromise Family = "promise"
	FamilyClaim   Family = "claim"
	FamilyExpect  Family = "expect"
)

// URIs are the extension URIs of tally's own families; an empty one is
// the default above.
type URIs struct{ Promise, Claim, Expect string }

// WithDefaults fills the empty URIs with the defaults above.
func (u URIs) WithDefaults() URIs {
	if u.Promise == "" {
		u.Promise = PromiseURI
	}
	if u.Claim == "" {
		u.Claim = ClaimURI
	}
	if u.Expect == "" {
		u.Expect = ExpectURI
	}
	return u
}

// Extension is one accepted extension URI and the family it carries.
type Extension struct {
	URI    string
	Family Family
}

// Accepted lists every URI a record may ride under, with its family:
// tally's own first, then pinki's promise URI and the expectations draft's.
func (u URIs) Accepted() []Extension {
	u = u.WithDefaults()
	return []Extension{
		{u.Promise, FamilyPromise}, {PinkiPromiseURI, FamilyPromise},
		{u.Claim, FamilyClaim},
		{u.Expect, FamilyExpect}, {ExpectationsDraftURI, FamilyExpect},
	}
}

// FamilyOf is the family an accepted URI carries.
func (u URIs) FamilyOf(uri string) (Family, bool) {
	for _, e := range u.Accepted() {
		if e.URI == uri {
			return e.Family, true
		}
	}
	return "", false
}

// Of is tally's own URI of a family.
func (u URIs) Of(f Family) string {
	u = u.WithDefaults()
	switch f {
	case FamilyClaim:
		return u.Claim
	case FamilyExpect:
		return u.Expect
	}
	return u.Promise
}

// Keys are the metadata keys a task or answer carries a family's record
// under: one per URI of the family among active (the request's activated
// extensions), else tally's own URI of it.
func (u URIs) Keys(active []string, f Family) []string {
	var keys []string
	for _, a := range active {
		if fam, _ := u.FamilyOf(a); fam == f {
			keys = append(keys, RecordKey(a, f))
		}
	}
	if len(keys) == 0 {
		keys = []string{u.Of(f)}
	}
	return keys
}

// RecordKeys are the metadata keys a record under uri may use: the URI
// itself, or pinki's "<URI>/<family>" form.
func RecordKeys(uri string, f Family) []string {
	return []string{uri, uri + "/" + string(f)}
}

// RecordKey is the key tally writes a record under: pinki's form for
// pinki's URI, the URI itself otherwise.
func RecordKey(uri string, f Family) string {
	if uri == PinkiPromiseURI {
		return uri + "/" + string(f)
	}
	return uri
}
