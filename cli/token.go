package cli

// tally token create|revoke|ls: the bearer tokens a server accepts, in the
// ledger directory's tokens file or through TALLY_URL with an admin token.

import (
	"fmt"

	"github.com/spf13/cobra"

	"tally/api"
	"tally/auth"
	restclient "tally/client"
)

func newToken(g *global) *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "Manage the bearer tokens the server accepts (here, or through TALLY_URL with an admin token)"}
	var tenant, participant, role string
	create := &cobra.Command{
		Use:     "create --tenant T --participant URI [--role agent|person|timekeeper|admin]",
		Short:   "Mint a token (printed once; only its hash is stored)",
		Example: "  tally token create --tenant acme --participant https://example.org/agents/reviewer",
		Args:    cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			if err := auth.Check(tenant, participant, role); err != nil {
				return usageError{err}
			}
			secret, tok, err := k.CreateToken(c.Context(), tenant, participant, role, g.io.Now())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(api.TokenCreated(secret, tok))
				return err
			}
			fmt.Fprintln(g.io.Out, secret)
			fmt.Fprintf(g.io.Err, "token %s for %s in tenant %s (role %s); it is shown only now\n", tok.ID, tok.Participant, tok.Tenant, tok.Role)
			return nil
		},
	}
	create.Flags().StringVar(&tenant, "tenant", "", "the tenant the token may act in (\"*\": an admin of every tenant's tokens)")
	create.Flags().StringVar(&participant, "participant", "", "the identity the token acts as")
	create.Flags().StringVar(&role, "role", auth.RoleAgent, "agent, person, timekeeper or admin")
	revoke := &cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token; the server refuses it from the next request (every cluster node, once it has applied the revocation)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			tok, err := k.RevokeToken(c.Context(), args[0], g.io.Now())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(api.TokenRevoked(tok))
				return err
			}
			fmt.Fprintf(g.io.Out, "revoked %s\n", args[0])
			return nil
		},
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List tokens (never their secrets); through a server, those the token administers",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.tokenKeeper()
			if err != nil {
				return err
			}
			toks, err := k.ListTokens(c.Context())
			if err != nil {
				return err
			}
			if g.json {
				_, err := g.io.Out.Write(api.TokenList(toks))
				return err
			}
			t := newTable(g.io.Out)
			fmt.Fprintln(t, "ID\tTENANT\tPARTICIPANT\tROLE\tCREATED\tREVOKED")
			for _, k := range toks {
				fmt.Fprintf(t, "%s\t%s\t%s\t%s\t%s\t%v\n", k.ID, k.Tenant, k.Participant, k.Role, k.Created.Format("2006-01-02T15:04:05Z"), k.Revoked)
			}
			return t.Flush()
		},
	}
	c.AddCommand(create, revoke, ls)
	return c
}

// tokenKeeper is where the token verbs act: the server TALLY_URL names
// (TALLY_TOKEN an admin token), else the ledger directory's tokens file.
func (g *global) tokenKeeper() (auth.Keeper, error) {
	if u := g.remoteURL(); u != "" {
		c, err := restclient.New(restclient.Config{URL: u, Token: g.io.Getenv("TALLY_TOKEN")})
		if err != nil {
			return nil, usageError{err}
		}
		return c, nil
	}
	root, err := g.ledgerRoot()
	if err != nil {
		return nil, err
	}
	return auth.Open(root), nil
}
