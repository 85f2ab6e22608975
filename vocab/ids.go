package vocab

// Typed ids: each is a string (or number) as stored, named so that a
// promise id is not handed where a claim id or an identity is wanted. They
// convert to and from their underlying type freely at the edges; the
// Family interface and the cores' family adapters take them.
type (
	// PromiseID names a promise (pinki's shape: pnk_ and hex digits, or
	// what the declarer chose).
	PromiseID string
	// ClaimID names a claim.
	ClaimID string
	// ExpectationID names an expectation.
	ExpectationID string
	// Participant is an identity: an agent card URL, a seat, a person.
	Participant string
	// Seq is a record's position in its session's log, from 1.
	Seq uint64
)
