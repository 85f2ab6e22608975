package client

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"tally/api"
	"tally/instant"
	"tally/rest"
	"tally/service"
	"tally/verb"
)

var _ service.Logs = (*Client)(nil)

// Export streams the server's export of the session to w: acknowledged
// lines only. A failure the server met after its first bytes arrives in a
// trailer and is returned as its refusal.
func (c *Client) Export(ctx context.Context, call service.Call, format string, w io.Writer, warn func(string)) (service.Exported, error) {
	q := api.EncodeQuery(&api.ExportQuery{Format: format})
	if format == "json" && !call.Now.IsZero() {
		q.Set("now", instant.Format(call.Now))
	}
	resp, done, err := c.Send(ctx, call, "GET", c.verbURL(verb.Of(verb.SessionExport), call, q), nil, "")
	if err != nil {
		return service.Exported{}, err
	}
	defer done()
	if v := resp.Header.Get(api.WarningHeader); v != "" && warn != nil {
		warn(v)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return service.Exported{}, fmt.Errorf("server %s: export: %w", c.url, err)
	}
	if t := resp.Trailer.Get(api.ExportErrorTrailer); t != "" {
		return service.Exported{}, rest.ReadRefusal(http.StatusInternalServerError, "500 Internal Server Error", []byte(t))
	}
	return service.Exported{}, nil
}

// Import sends lines to the server's import (an admin-role token's).
func (c *Client) Import(ctx context.Context, call service.Call, lines []byte) (service.Imported, error) {
	doc, err := c.Exchange(ctx, call, "POST", c.verbURL(verb.Of(verb.SessionImport), call, nil), bytes.NewReader(lines), "application/x-ndjson")
	return answer(service.ReadImported, doc, err)
}

// Verify has the server verify the session's log: its report, and the
// log's name under the server's ledger directory.
func (c *Client) Verify(ctx context.Context, call service.Call) (service.Verified, error) {
	resp, done, err := c.Send(ctx, call, "GET", c.verbURL(verb.Of(verb.SessionVerify), call, nil), nil, "")
	if err != nil {
		return service.Verified{}, err
	}
	defer done()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return service.Verified{}, fmt.Errorf("server %s: verify: %w", c.url, err)
	}
	return verified(service.Doc{JSON: b}, resp.Header.Get(api.LogHeader))
}

// VerifyAll has the server verify every session of the token's tenant.
func (c *Client) VerifyAll(ctx context.Context, call service.Call) (service.Verified, error) {
	doc, err := c.Do(ctx, call, "GET", c.verbURL(verb.Of(verb.Verify), call, nil), nil)
	if err != nil {
		return service.Verified{}, err
	}
	return verified(doc, "")
}

func verified(doc service.Doc, log string) (service.Verified, error) {
	whole, err := service.ReadWhole(doc)
	if err != nil {
		return service.Verified{}, err
	}
	return service.Verified{Doc: doc, Log: log, Whole: whole}, nil
}
