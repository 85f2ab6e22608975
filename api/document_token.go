package api

import (
	"time"

	"tally/auth"
)

// tokenMembers are a token's members, in the order every token document
// lists them; never its secret or its hash.
func tokenMembers(t auth.Token) []Member {
	return []Member{M("id", S(t.ID)), M("tenant", S(t.Tenant)), M("participant", S(t.Participant)), M("role", S(t.Role)),
		M("created", S(t.Created.UTC().Format(time.RFC3339))), M("revoked", boolean(t.Revoked))}
}

func boolean(b bool) []byte {
	if b {
		return []byte("true")
	}
	return []byte("false")
}

// TokenCreated is the document of a minted token: its id, its secret
// (shown only in this document) and what it grants.
func TokenCreated(secret string, t auth.Token) []byte {
	ms := tokenMembers(t)
	return Doc(append([]Member{ms[0], M("token", S(secret))}, ms[1:]...)...)
}

// TokenRevoked is the document of a revoked token.
func TokenRevoked(t auth.Token) []byte { return Doc(tokenMembers(t)...) }

// TokenList is the document of a token listing.
func TokenList(ts []auth.Token) []byte {
	b := []byte{'['}
	for i, t := range ts {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for j, m := range tokenMembers(t) {
			if j > 0 {
				b = append(b, ',')
			}
			b = append(b, m...)
		}
		b = append(b, '}')
	}
	return Doc(M("tokens", append(b, ']')))
}
