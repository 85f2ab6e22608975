package api

// TokenCreate is the document of `tally token create` and of POST
// /v1/tokens: the tenant the token acts in ("*" for a token that
// administers every tenant's tokens), the identity it acts as, and its
// role (agent when empty).
type TokenCreate struct {
	Tenant      string `json:"tenant"`
	Participant string `json:"participant"`
	Role        string `json:"role,omitempty"`
}
