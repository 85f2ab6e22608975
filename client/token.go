package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"tally/api"
	"tally/auth"
	"tally/service"
)

// The token routes (/v1/tokens): `tally token` through a server, with an
// admin-role token as TALLY_TOKEN.

var _ auth.Keeper = (*Client)(nil)

// Authenticate is the server's to do: a client checks no token itself.
func (c *Client) Authenticate(string) (auth.Token, error) {
	return auth.Token{}, fmt.Errorf("client: tokens are authenticated by the server %s", c.url)
}

// tokenDoc is a token document: the token and, when minted, its secret.
type tokenDoc struct {
	auth.Token
	Secret string `json:"token"`
}

// CreateToken mints a token at the server; now is the server's to fix.
func (c *Client) CreateToken(ctx context.Context, tenant, participant, role string, _ time.Time) (string, auth.Token, error) {
	b, err := json.Marshal(api.TokenCreate{Tenant: tenant, Participant: participant, Role: role})
	if err != nil {
		return "", auth.Token{}, err
	}
	var d tokenDoc
	if err := c.tokenCall(ctx, "POST", c.url+"/v1/tokens", b, &d); err != nil {
		return "", auth.Token{}, err
	}
	return d.Secret, d.Token, nil
}

// RevokeToken revokes a token at the server.
func (c *Client) RevokeToken(ctx context.Context, id string, _ time.Time) (auth.Token, error) {
	var d tokenDoc
	err := c.tokenCall(ctx, "POST", c.url+"/v1/tokens/"+url.PathEscape(id)+"/revoke", nil, &d)
	return d.Token, err
}

// ListTokens lists the tokens the client's token administers.
func (c *Client) ListTokens(ctx context.Context) ([]auth.Token, error) {
	var d struct {
		Tokens []auth.Token `json:"tokens"`
	}
	err := c.tokenCall(ctx, "GET", c.url+"/v1/tokens", nil, &d)
	return d.Tokens, err
}

func (c *Client) tokenCall(ctx context.Context, method, u string, body []byte, out any) error {
	doc, err := c.Do(ctx, service.Call{}, method, u, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(doc.JSON, out); err != nil {
		return fmt.Errorf("server %s: token answer: %w", c.url, err)
	}
	return nil
}
