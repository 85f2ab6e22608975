package client

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/zeebo/blake3"

	"tally/api"
	"tally/claim"
	"tally/digest"
	"tally/refuse"
	"tally/service"
	"tally/verb"
)

// The claims family over REST: a write posts its api document to the
// verb's route under claims/{id}, whose path names the claim (and the
// testament, check or artifact), and reads back {"records":[…],"claim":…};
// an artifact's and a verdict's bytes stream as the body of a PUT, their
// description in the query. Bytes read back are checked against the
// recorded content digest as they arrive.

var _ service.Claims = (*Client)(nil)

// claimPost posts d as the verb called name, args its path's other
// parameters, and reads the write's answer. A path argument left empty is
// refused here, as the core would refuse it: there is no route to send it
// to.
func (c *Client) claimPost(ctx context.Context, call service.Call, d any, name string, args ...string) (service.ClaimWritten, error) {
	if err := pathNamed(verb.Of(name), args); err != nil {
		return service.ClaimWritten{}, err
	}
	doc, err := c.post(ctx, call, d, name, args...)
	return answer(service.ReadClaimWritten, doc, err)
}

// pathNamed refuses an empty argument of v's path, naming the document
// member it is.
func pathNamed(v verb.Verb, args []string) error {
	for i, a := range args {
		if a == "" && i < len(v.HTTP.Members) {
			return refuse.Invalidf(v.HTTP.Members[i], "required")
		}
	}
	return nil
}

func (c *Client) CreateClaim(ctx context.Context, call service.Call, d api.ClaimCreate) (service.ClaimWritten, error) {
	if d.Slots == nil {
		d.Slots = []claim.SlotSpec{}
	}
	return c.claimPost(ctx, call, d, verb.ClaimCreate)
}

func (c *Client) PostClaim(ctx context.Context, call service.Call, d api.ClaimPost) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimPost, d.Claim)
}

func (c *Client) CancelClaim(ctx context.Context, call service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimCancel, d.Claim)
}

func (c *Client) RevokeClaim(ctx context.Context, call service.Call, d api.ClaimEnd) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimRevoke, d.Claim)
}

func (c *Client) SupersedeClaim(ctx context.Context, call service.Call, d api.ClaimSupersede) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimSupersede, d.Claim)
}

func (c *Client) AcquireReceipt(ctx context.Context, call service.Call, d api.ClaimReceipt) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimReceipt, d.Claim)
}

func (c *Client) AdoptReceipt(ctx context.Context, call service.Call, d api.ClaimAdopt) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimAdopt, d.Claim)
}

func (c *Client) RecordProgress(ctx context.Context, call service.Call, d api.ClaimProgress) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimProgress, d.Claim)
}

func (c *Client) CloseTestament(ctx context.Context, call service.Call, d api.ClaimTestament) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimTestamentClose, d.Claim)
}

func (c *Client) PostTestament(ctx context.Context, call service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimTestamentPost, d.Claim, d.Testament)
}

func (c *Client) ReceiveTestament(ctx context.Context, call service.Call, d api.ClaimTestamentRef) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimTestamentReceive, d.Claim, d.Testament)
}

func (c *Client) CommitDeadline(ctx context.Context, call service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimDeadline, d.Claim)
}

func (c *Client) CommitDependency(ctx context.Context, call service.Call, d api.ClaimRef) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimDependency, d.Claim)
}

func (c *Client) BeginCheck(ctx context.Context, call service.Call, d api.ClaimBegin) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimCheckBegin, d.Claim, d.Check)
}

// ReportCheck posts the verdict; with ev it streams ev's bytes as the body
// of the verdict's PUT, which stores them and reports in one write.
func (c *Client) ReportCheck(ctx context.Context, call service.Call, d api.ClaimCheck, ev *service.Evidence) (service.ClaimWritten, error) {
	if ev == nil {
		return c.claimPost(ctx, call, d, verb.ClaimCheckReport, d.Claim, d.Check)
	}
	q := query(map[string]string{"artifact": d.Artifact, "digest": d.Digest, "result": d.Result, "note": d.Note,
		"evidence": d.Evidence, "kind": ev.Kind, "schema": ev.Schema, "name": ev.Name})
	return c.claimPut(ctx, call, q, ev.Body, verb.ClaimCheckEvidence, d.Claim, d.Check)
}

// PublishArtifact streams body as the artifact's bytes, its description in
// the query.
func (c *Client) PublishArtifact(ctx context.Context, call service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
	q := query(map[string]string{"role": d.Role, "slot": d.Slot, "kind": d.Kind, "schema": d.Schema, "name": d.Name})
	if d.Generation > 0 {
		q.Set("generation", strconv.FormatUint(d.Generation, 10))
	}
	return c.claimPut(ctx, call, q, body, verb.ClaimArtifactPut, d.Claim, d.Artifact)
}

func (c *Client) ReceiveArtifact(ctx context.Context, call service.Call, d api.ClaimArtifactRef) (service.ClaimWritten, error) {
	return c.claimPost(ctx, call, d, verb.ClaimArtifactReceive, d.Claim, d.Artifact)
}

// claimPut streams body as the request of the verb called name, with the
// query q.
func (c *Client) claimPut(ctx context.Context, call service.Call, q url.Values, body io.Reader, name string, args ...string) (service.ClaimWritten, error) {
	v := verb.Of(name)
	if err := pathNamed(v, args); err != nil {
		return service.ClaimWritten{}, err
	}
	doc, err := c.Exchange(ctx, call, v.HTTP.Method, c.verbURL(v, call, q, args...), body, "application/octet-stream")
	return answer(service.ReadClaimWritten, doc, err)
}

// query is the members of m that are not empty, as a query.
func query(m map[string]string) url.Values {
	q := url.Values{}
	for k, v := range m {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

func (c *Client) Claim(ctx context.Context, call service.Call, id string) (service.ClaimShown, error) {
	if id == "" {
		return service.ClaimShown{}, claim.UnknownClaim(id)
	}
	doc, err := c.get(ctx, call, nil, verb.ClaimShow, id)
	return answer(service.ReadClaimShown, doc, err)
}

func (c *Client) ListClaims(ctx context.Context, call service.Call, f claim.Filter) (service.ClaimList, error) {
	q := api.ClaimQueryOf(f)
	doc, err := c.get(ctx, call, api.EncodeQuery(&q), verb.ClaimList)
	return answer(service.ReadClaimList, doc, err)
}

func (c *Client) ClaimGraph(ctx context.Context, call service.Call) (service.ClaimGraph, error) {
	doc, err := c.get(ctx, call, nil, verb.ClaimGraph)
	return answer(service.ReadClaimGraph, doc, err)
}

func (c *Client) ListArtifacts(ctx context.Context, call service.Call, aq service.ArtifactQuery) (service.ArtifactList, error) {
	q := api.EncodeQuery(&aq)
	call.Now = time.Time{} // the listing takes no now
	doc, err := c.get(ctx, call, q, verb.ArtifactList)
	return answer(service.ReadArtifactList, doc, err)
}

func (c *Client) VerifyArtifact(ctx context.Context, call service.Call, claimID, id string) (service.ArtifactList, error) {
	if err := pathNamed(verb.Of(verb.ClaimArtifactVerify), []string{claimID, id}); err != nil {
		return service.ArtifactList{}, err
	}
	doc, err := c.get(ctx, call, nil, verb.ClaimArtifactVerify, claimID, id)
	return answer(service.ReadArtifactList, doc, err)
}

// Artifact reads the claim (the artifact's record) and then its bytes,
// checked against the recorded content as they arrive.
func (c *Client) Artifact(ctx context.Context, call service.Call, claimID, id string) (service.ArtifactContent, error) {
	shown, err := c.Claim(ctx, call, claimID)
	if err != nil {
		return service.ArtifactContent{}, err
	}
	a, ok := shown.Claim.FindArtifact(id)
	if !ok {
		return service.ArtifactContent{}, claim.UnknownArtifact(claimID, id)
	}
	content, err := digest.ParseContentDigest(a.Content)
	if err != nil {
		return service.ArtifactContent{}, fmt.Errorf("artifact %s: %w", a.Artifact, err)
	}
	body, err := c.fetch(ctx, call, "artifact "+id, content, verb.ClaimArtifactGet, claimID, id)
	if err != nil {
		return service.ArtifactContent{}, err
	}
	return service.ArtifactContent{Artifact: &a, Content: content, Body: body}, nil
}

// Content reads bytes by content digest, checked as they arrive; the
// artifact is known by what the answer's headers say of it.
func (c *Client) Content(ctx context.Context, call service.Call, content digest.ContentDigest) (service.ArtifactContent, error) {
	resp, done, err := c.Send(ctx, call, "GET", c.verbURL(verb.Of(verb.ArtifactContent), call, nil, content.String()), nil, "")
	if err != nil {
		return service.ArtifactContent{}, err
	}
	a := &claim.ArtifactView{Digest: resp.Header.Get("X-Tally-Digest"), Content: content.String(), Size: resp.ContentLength}
	body := &checkedBody{r: resp.Body, done: done, h: digest.NewContentHasher(), want: content, what: "content " + content.String()}
	return service.ArtifactContent{Artifact: a, Content: content, Body: body}, nil
}

// fetch opens the bytes of the verb called name, checked against want.
func (c *Client) fetch(ctx context.Context, call service.Call, what string, want digest.ContentDigest, name string, args ...string) (io.ReadCloser, error) {
	resp, done, err := c.Send(ctx, call, "GET", c.verbURL(verb.Of(name), call, nil, args...), nil, "")
	if err != nil {
		return nil, err
	}
	return &checkedBody{r: resp.Body, done: done, h: digest.NewContentHasher(), want: want, what: what}, nil
}

// checkedBody hashes what it reads and, at the end, answers a refusal
// (code damaged) instead of io.EOF when the bytes are not the content want
// names, so a copy made through it is kept only when it is exact.
type checkedBody struct {
	r    io.Reader
	done func()
	h    *blake3.Hasher
	want digest.ContentDigest
	what string
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.h.Write(p[:n])
	if err == io.EOF {
		if got := digest.ContentSum(b.h); got != b.want {
			return n, refuse.New(service.CodeDamaged, "artifact", fmt.Sprintf("the bytes of %s the server sent are not its content (content %s, received %s); nothing was written", b.what, b.want, got))
		}
	}
	return n, err
}

func (b *checkedBody) Close() error { b.done(); return nil }
