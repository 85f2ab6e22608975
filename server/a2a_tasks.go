package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/zeebo/blake3"

	"tally/a2atask"
	"tally/api"
	"tally/auth"
	"tally/claim"
	"tally/expect"
	"tally/promise"
	"tally/refuse"
	"tally/rest"
	"tally/service"
	"tally/verb"
)

// a2aHandler answers A2A requests through the server's Service in the
// request's session (the families that do not run through it yet, from the
// session's ledger); how a record is a task (its state, status message, artifacts and
// metadata) is package a2atask's.
type a2aHandler struct{ s *Server }

var _ a2asrv.RequestHandler = (*a2aHandler)(nil)

// a2aListMax bounds a ListTasks page.
const (
	a2aListDefault = 50
	a2aListMax     = 100
)

// caller is the request's call, as the middleware authenticated it.
func (h *a2aHandler) caller(ctx context.Context) (*a2aCall, error) {
	c := a2aCallFrom(ctx)
	if c == nil {
		return nil, a2a.ErrUnauthenticated
	}
	return c, nil
}

// readCall is the service Call of a read in the request's session, at
// one instant for every family the read asks about.
func (h *a2aHandler) readCall(c *a2aCall) service.Call {
	return service.Call{Tenant: c.tenant, Session: c.session, Now: h.s.cfg.Ledger.Now().UTC()}
}

// writeCall is the service Call of a write under request id rid: the
// caller's identity (under --insecure-dev without one, the party the
// record names: party).
func (h *a2aHandler) writeCall(c *a2aCall, party string, rid string) (service.Call, error) {
	if len(rid) > service.RequestIDMax {
		return service.Call{}, a2atask.InvalidParams("messageId", "a request id is at most 256 bytes")
	}
	actor, err := h.s.writeActor(c.p, party)
	if err != nil {
		return service.Call{}, a2aError(err)
	}
	return service.Call{Tenant: c.tenant, Session: c.session, Actor: actor, Person: c.p.role == auth.RolePerson, RequestID: rid}, nil
}

// findPromise is the promise whose task id is task (a2atask.FindPromise), or
// nil, read through the Service.
func (h *a2aHandler) findPromise(ctx context.Context, c *a2aCall, task string) (*promise.View, error) {
	res, err := h.s.local.ListPromises(ctx, h.readCall(c), promise.Filter{State: "all", Task: task})
	if err != nil {
		return nil, a2aError(err)
	}
	v, _ := a2atask.FindPromise(res.Promises, task)
	return v, nil
}

func (c *a2aCall) contextID() string { return c.tenant + "/" + c.session }

// keysOf are the metadata keys a task or answer carries a family's record
// under (a2atask.URIs.Keys).
func (h *a2aHandler) keysOf(c *a2aCall, fam a2atask.Family) []string {
	return h.s.cfg.A2A.uris().Keys(c.active, fam)
}

// a2aError maps a ledger error to an A2A error naming the field and rule.
func a2aError(err error) error {
	if err == nil {
		return nil
	}
	var ae *a2a.Error
	if errors.As(err, &ae) {
		return err
	}
	if r, ok := refuse.As(err); ok {
		sentinel := a2a.ErrInvalidParams
		switch r.Code {
		case refuse.NotFound, CodeNoSuchSession:
			sentinel = a2a.ErrTaskNotFound
		case refuse.Forbidden:
			sentinel = a2a.ErrUnauthorized
		case CodeDamaged: // the server's copy, not the request, is at fault
			sentinel = a2a.ErrInternalError
		}
		return a2a.NewError(sentinel, r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": r.Field, "rule": r.Rule})
	}
	var ref *rest.Refusal
	if errors.As(err, &ref) { // a Service's answer from elsewhere (another node)
		return refusalError(ref)
	}
	var rf rest.Refuser
	if errors.As(err, &rf) && rf.Refusal().Status == http.StatusServiceUnavailable {
		return refusalError(rf.Refusal()) // a cluster's retryable answer
	}
	var ie *service.IdempotencyError
	if errors.As(err, &ie) {
		return a2a.NewError(a2a.ErrInvalidRequest, ie.Error()).WithDetails(map[string]any{"code": ie.Code, "field": "messageId"})
	}
	var br badRequest
	if errors.As(err, &br) {
		return a2a.NewError(a2a.ErrInvalidParams, br.msg)
	}
	if errors.Is(err, errNotFound) {
		return a2a.NewError(a2a.ErrTaskNotFound, "not found")
	}
	return fmt.Errorf("%w: %v", a2a.ErrInternalError, err)
}

// refusalError maps a refusal that arrives as a document (its status and
// code) as a2aError maps the error it was made from.
func refusalError(r *rest.Refusal) error {
	sentinel := a2a.ErrInternalError
	switch {
	case r.Code == service.CodeIdempotencyConflict || r.Code == service.CodeRequestHistoryExpired:
		return a2a.NewError(a2a.ErrInvalidRequest, r.Message).WithDetails(map[string]any{"code": r.Code, "field": "messageId"})
	case r.Status == http.StatusNotFound:
		sentinel = a2a.ErrTaskNotFound
	case r.Status == http.StatusForbidden:
		sentinel = a2a.ErrUnauthorized
	case r.Status == http.StatusNotImplemented:
		sentinel = a2a.ErrUnsupportedOperation
	case r.Status >= 400 && r.Status < 500:
		sentinel = a2a.ErrInvalidParams
	case r.Status == http.StatusServiceUnavailable:
		// Retryable, and not the server's fault: its message is the
		// client's to read (whether the write may have committed).
		return a2a.NewError(a2a.ErrServerError, r.Message).WithDetails(retryDetails(r))
	}
	return a2a.NewError(sentinel, r.Message).WithDetails(map[string]any{"code": r.Code})
}

// retryDetails are the details of a retryable answer: its code, the
// seconds to wait, and the request id a retry of a write of unknown
// outcome must carry.
func retryDetails(r *rest.Refusal) map[string]any {
	d := map[string]any{"code": r.Code}
	if r.RetryAfter > 0 {
		d["retry_after_seconds"] = int(r.RetryAfter / time.Second)
	}
	var doc struct {
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(r.Document, &doc) == nil && doc.RequestID != "" {
		d["request_id"] = doc.RequestID
	}
	return d
}

// GetTask returns the task of a promise, of a claim, or of an origin of
// expectations (origin), looked up in that order.
func (h *a2aHandler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, a2atask.InvalidParams("id", "is required")
	}
	id := string(req.ID)
	v, err := h.findPromise(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if v != nil {
		return a2atask.PromiseTask(v, c.contextID(), h.keysOf(c, a2atask.FamilyPromise)), nil
	}
	cl, err := h.findClaim(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if cl != nil {
		return a2atask.ClaimTask(&cl.Claim, c.contextID(), h.keysOf(c, a2atask.FamilyClaim), c.sessionURL), nil
	}
	o, err := h.origin(ctx, c, id)
	if err != nil {
		return nil, err
	}
	return a2atask.OriginTaskOf(id, o.Expectations, expect.Outcome(o.Outcome), o.Outcome != "", c.contextID(), h.keysOf(c, a2atask.FamilyExpect)), nil
}

// origin is task as the origin of expectations (an outcome recorded or
// expectations raised on it), read through the Service; a task that is
// neither is TaskNotFound.
func (h *a2aHandler) origin(ctx context.Context, c *a2aCall, task string) (*service.TaskOrigin, error) {
	res, err := h.s.local.TaskOrigin(ctx, h.readCall(c), task)
	if r, ok := refuse.As(err); ok && r.Code == refuse.NotFound {
		return nil, noTask(c, task)
	}
	if err != nil {
		return nil, a2aError(err)
	}
	return &res.Task, nil
}

// noTask is the refusal of a task id the session has no task for.
func noTask(c *a2aCall, id string) error {
	return a2a.NewError(a2a.ErrTaskNotFound, "no task "+id+" in session "+c.contextID())
}

// ListTasks lists the session's promises as tasks in declaration order,
// then its claims in creation order; the page token is the offset of the
// page's first task.
func (h *a2aHandler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	size := req.PageSize
	switch {
	case size == 0:
		size = a2aListDefault
	case size < 0 || size > a2aListMax:
		return nil, a2atask.InvalidParams("pageSize", "must be between 1 and "+strconv.Itoa(a2aListMax))
	}
	if req.Status != a2a.TaskStateUnspecified && !slices.Contains(a2atask.States(), req.Status) {
		return nil, a2atask.InvalidParams("status", "must be one of "+strings.Join(a2atask.StateNames(), ", ")+" (got "+strconv.Quote(string(req.Status))+")")
	}
	off := 0
	if req.PageToken != "" {
		if off, err = strconv.Atoi(req.PageToken); err != nil || off < 0 {
			return nil, a2atask.InvalidParams("pageToken", "is not a token this server issued")
		}
	}
	call := h.readCall(c)
	promises, err := h.s.local.ListPromises(ctx, call, promise.Filter{State: "all"})
	if err != nil {
		return nil, a2aError(err)
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size}
	if req.ContextID != "" && req.ContextID != c.contextID() {
		return resp, nil
	}
	var all []*a2a.Task
	keep := func(t *a2a.Task) {
		if req.Status != a2a.TaskStateUnspecified && t.Status.State != req.Status {
			return
		}
		if req.StatusTimestampAfter != nil && !t.Status.Timestamp.After(*req.StatusTimestampAfter) {
			return
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		all = append(all, t)
	}
	promiseKeys, claimKeys := h.keysOf(c, a2atask.FamilyPromise), h.keysOf(c, a2atask.FamilyClaim)
	for i := range promises.Promises {
		keep(a2atask.PromiseTask(&promises.Promises[i], c.contextID(), promiseKeys))
	}
	claims, err := h.s.local.ListClaims(ctx, call, claim.Filter{})
	if err != nil {
		return nil, a2aError(err)
	}
	for _, sm := range claims.Claims {
		cl, err := h.s.local.Claim(ctx, call, sm.Claim)
		if err != nil {
			return nil, a2aError(err)
		}
		keep(a2atask.ClaimTask(&cl.Claim, c.contextID(), claimKeys, c.sessionURL))
	}
	resp.TotalSize = len(all)
	if off < len(all) {
		end := min(off+size, len(all))
		resp.Tasks = all[off:end]
		if end < len(all) {
			resp.NextPageToken = strconv.Itoa(end)
		}
	}
	return resp, nil
}

// CancelTask ends a promise as the caller: the debtor cancels it (with a
// reason from the request's metadata "reason", or from a record under an
// activated promise URI), the creditor releases it. Anyone else is refused
// by the ledger's rules. A claim's task is cancelled as its claimant
// (cancelClaim). A task that is no promise's or claim's but the origin of
// expectations gets the outcome cancelled, withdrawing them (cancelOrigin).
func (h *a2aHandler) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.ID == "" {
		return nil, a2atask.InvalidParams("id", "is required")
	}
	v, err := h.findPromise(ctx, c, string(req.ID))
	if err != nil {
		return nil, err
	}
	if v == nil {
		cl, err := h.findClaim(ctx, c, string(req.ID))
		if err != nil {
			return nil, err
		}
		if cl != nil {
			return h.cancelClaim(ctx, c, req)
		}
		if _, err := h.origin(ctx, c, string(req.ID)); err != nil {
			return nil, err
		}
		return h.cancelOrigin(ctx, c, string(req.ID))
	}
	if !v.ResolvedAt.IsZero() {
		return nil, a2a.NewError(a2a.ErrTaskNotCancelable, "promise "+v.ID+" is already resolved as "+string(v.State))
	}
	keys := h.keysOf(c, a2atask.FamilyPromise)
	d := api.PromiseResolve{ID: v.ID, As: promise.AsCancelled, Reason: a2atask.CancelReason(c.cancelRequestMetadata(req), keys)}
	if c.p.actor == v.To && c.p.actor != v.By {
		d.As = promise.AsReleased
	}
	if d.As == promise.AsCancelled && strings.TrimSpace(d.Reason) == "" {
		return nil, a2atask.InvalidParams("reason", "cancelling a promise needs a reason: put it in the request's metadata.reason")
	}
	call, err := h.writeCall(c, "", c.requestID)
	if err != nil {
		return nil, err
	}
	res, err := h.s.local.ResolvePromise(ctx, call, d)
	if err != nil {
		return nil, a2aError(err)
	}
	return h.promiseTask(c, res.Doc, keys)
}

// cancelRequestMetadata is a CancelTask's metadata, from the JSON-RPC
// params or the HTTP+JSON body.
func (c *a2aCall) cancelRequestMetadata(req *a2a.CancelTaskRequest) map[string]any {
	if req.Metadata != nil {
		return req.Metadata
	}
	return c.cancelMetadata
}

// SendMessage carries one record (or action on one) in the message's
// metadata under an activated extension URI: a promise's here, an
// expectation's in sendExpect, a claim's in sendClaim.
func (h *a2aHandler) SendMessage(ctx context.Context, req *a2a.SendMessageRequest) (a2a.SendMessageResult, error) {
	c, err := h.caller(ctx)
	if err != nil {
		return nil, err
	}
	msg := req.Message
	if msg == nil {
		return nil, a2atask.InvalidParams("message", "is required")
	}
	if msg.ID == "" {
		return nil, a2atask.InvalidParams("message.messageId", "is required")
	}
	if msg.Role != a2a.MessageRoleUser && msg.Role != a2a.MessageRoleAgent {
		return nil, a2atask.InvalidParams("message.role", "must be ROLE_USER or ROLE_AGENT (got "+strconv.Quote(msg.Role.String())+")")
	}
	uri, key, raw, err := h.s.cfg.A2A.uris().FindRecord(msg.Metadata)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(c.active, uri) {
		return nil, a2a.NewError(a2a.ErrExtensionSupportRequired,
			"A2A-Extensions: the record in metadata[\""+key+"\"] needs "+uri+" activated in the A2A-Extensions request header").
			WithDetails(map[string]any{"code": string(refuse.Invalid), "field": "A2A-Extensions", "rule": "activate " + uri})
	}
	switch fam, _ := h.s.cfg.A2A.uris().FamilyOf(uri); fam {
	case a2atask.FamilyExpect:
		return h.sendExpect(ctx, c, req, uri, key, raw)
	case a2atask.FamilyClaim:
		return h.sendClaim(ctx, c, req, uri, key, raw)
	}
	return h.sendPromise(ctx, c, msg, key, raw, []string{a2atask.RecordKey(uri, a2atask.FamilyPromise)})
}

// sendRequestID is the request id of a SendMessage: the Idempotency-Key
// header, else the message id, so a client's retry of one message is one
// write.
func (c *a2aCall) sendRequestID(msg *a2a.Message) string {
	if c.requestID != "" {
		return c.requestID
	}
	return "a2a:" + msg.ID
}

// sendPromise runs a promise record (pinki's shape, plus an optional
// "action": declare (default), amend, resolve or assess) through the
// Service as the caller: its document is the api document the REST route
// takes, and the answer is the task of the write's response document (the
// recorded one on a retry), its record under each of keys.
func (h *a2aHandler) sendPromise(ctx context.Context, c *a2aCall, msg *a2a.Message, key string, raw any, keys []string) (*a2a.Task, error) {
	rec, err := a2atask.ReadRecord(a2atask.PromiseActions(), key, raw, "a promise record")
	if err != nil {
		return nil, err
	}
	where, action := rec.Where, rec.Action.Name
	underRecord := func(err error) error {
		if r, ok := refuse.As(err); ok {
			return a2a.NewError(a2a.ErrInvalidParams, where+"."+r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": r.Field, "rule": r.Rule})
		}
		return a2aError(err)
	}
	body, err := rec.Body(nil)
	if err != nil {
		return nil, err
	}
	var (
		declare api.PromiseDeclare
		amend   api.PromiseAmend
		resolve api.PromiseResolve
		assess  api.PromiseAssess
		doc     any
		id      *string // the document's promise id
		until   *string // the document's deadline: the Service's refusal of it is named under the record
		party   string
	)
	switch action {
	case "declare":
		doc, id, until = &declare, &declare.ID, &declare.Until
	case "amend":
		doc, id, until = &amend, &amend.ID, &amend.Until
	case "resolve":
		doc, id = &resolve, &resolve.ID
	default:
		doc, id = &assess, &assess.ID
	}
	if err := api.Decode(where, body, doc); err != nil {
		return nil, underRecord(err)
	}
	if action != "declare" && *id == "" {
		if msg.TaskID == "" {
			return nil, a2atask.InvalidParams(where+".id", "names the promise to "+action+" (or send the message in its task: message.taskId)")
		}
		v, err := h.findPromise(ctx, c, string(msg.TaskID))
		if err != nil && !isNoSuchSession(err) {
			return nil, err
		}
		if v == nil {
			return nil, noTask(c, string(msg.TaskID))
		}
		*id = v.ID
	}
	switch action {
	case "declare":
		declare.Task = cmp.Or(declare.Task, string(msg.TaskID)) // the message's task, when it names none
		party = declare.By
	case "assess":
		party = assess.Observer
	}
	call, err := h.writeCall(c, party, c.sendRequestID(msg))
	if err != nil {
		return nil, err
	}
	res, err := a2aVerb("promise", action).Call(ctx, h.s.local, call, verb.Input{Doc: doc})
	if r, ok := refuse.As(err); ok && until != nil && r.Field == "until" {
		return nil, underRecord(err) // the Service parsed the deadline: named under the record, as a decode error is
	}
	if err != nil {
		return nil, a2aError(err)
	}
	return h.promiseTask(c, res, keys)
}

// a2aVerb is the verb of the table a record of family names by action
// (one ReadRecord found).
func a2aVerb(family, action string) verb.Verb {
	for _, v := range verb.A2AActions(family) {
		if v.A2A == action {
			return v
		}
	}
	panic("server: no verb of the table is the " + family + " record's action " + action)
}

// isNoSuchSession reports a read of a session that has no log.
func isNoSuchSession(err error) bool {
	var ae *a2a.Error
	if errors.As(err, &ae) {
		code, _ := ae.Details["code"].(string)
		return code == string(CodeNoSuchSession)
	}
	return false
}

// promiseTask is the task of a promise write's response document, with
// what the write warned of: mapped from the document, so that a retry,
// answered with the recorded document, gets the same task.
func (h *a2aHandler) promiseTask(c *a2aCall, doc service.Doc, keys []string) (*a2a.Task, error) {
	res, err := service.ReadPromiseWritten(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", a2a.ErrInternalError, err)
	}
	if res.Promise.ID == "" {
		return nil, fmt.Errorf("%w: the response names no promise", a2a.ErrInternalError)
	}
	t := a2atask.PromiseTask(&res.Promise, c.contextID(), keys)
	a2atask.WithWarnings(t, keys, res.Warnings)
	return t, nil
}

// a2aDigest hashes an A2A request's parts (the id of the message that
// answers a request id is drawn from it).
func a2aDigest(parts ...string) [32]byte {
	h := blake3.NewDeriveKey("tally 2026-11 a2a request digest v1")
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// cancelError maps a refused cancellation: a conflict (the record already
// ended) is NotCancelable, anything else as a2aError.
func cancelError(err error) error {
	if r, ok := refuse.As(err); ok && r.Code == refuse.Conflict {
		return a2a.NewError(a2a.ErrTaskNotCancelable, r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": r.Field, "rule": r.Rule})
	}
	return a2aError(err)
}

// SendStreamingMessage and SubscribeToTask are not offered (the card says
// streaming: false); the session's event stream is …/events.
func (h *a2aHandler) SendStreamingMessage(ctx context.Context, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
}

func (h *a2aHandler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
}

func (h *a2aHandler) GetTaskPushConfig(context.Context, *a2a.GetTaskPushConfigRequest) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aHandler) ListTaskPushConfigs(context.Context, *a2a.ListTaskPushConfigRequest) (*a2a.ListTaskPushConfigResponse, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aHandler) CreateTaskPushConfig(context.Context, *a2a.PushConfig) (*a2a.PushConfig, error) {
	return nil, a2a.ErrPushNotificationNotSupported
}

func (h *a2aHandler) DeleteTaskPushConfig(context.Context, *a2a.DeleteTaskPushConfigRequest) error {
	return a2a.ErrPushNotificationNotSupported
}

func (h *a2aHandler) GetExtendedAgentCard(context.Context, *a2a.GetExtendedAgentCardRequest) (*a2a.AgentCard, error) {
	return nil, a2a.ErrExtendedCardNotConfigured
}
