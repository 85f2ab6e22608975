package server

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/zeebo/blake3"

	"tally/a2atask"
	"tally/api"
	"tally/claim"
	"tally/ledger"
	"tally/promise"
	"tally/rule"
)

// a2aHandler answers A2A requests from the ledger of the request's session;
// how a record is a task (its state, status message, artifacts and
// metadata) is package a2atask's.
type a2aHandler struct{ s *Server }

var _ a2asrv.RequestHandler = (*a2aHandler)(nil)

// a2aListMax bounds a ListTasks page.
const (
	a2aListDefault = 50
	a2aListMax     = 100
)

// call returns the request's call and its session's ledger, which a read
// never creates.
func (h *a2aHandler) call(ctx context.Context) (*a2aCall, *ledger.Ledger, error) {
	return h.callFor(ctx, false)
}

// callFor is call, creating the session if create is set (a write).
func (h *a2aHandler) callFor(ctx context.Context, create bool) (*a2aCall, *ledger.Ledger, error) {
	c := a2aCallFrom(ctx)
	if c == nil {
		return nil, nil, a2a.ErrUnauthenticated
	}
	l, err := h.s.sessionIn(ctx, c.tenant, c.session, create)
	if err != nil {
		return nil, nil, a2aError(err)
	}
	return c, l, nil
}

// taskCall is call for a request about the task id (required), with the
// session's ledger caught up with what other processes appended.
func (h *a2aHandler) taskCall(ctx context.Context, id a2a.TaskID) (*a2aCall, *ledger.Ledger, error) {
	c, l, err := h.call(ctx)
	if err != nil {
		return nil, nil, err
	}
	if id == "" {
		return nil, nil, a2atask.InvalidParams("id", "is required")
	}
	if err := l.Refresh(); err != nil {
		return nil, nil, a2aError(err)
	}
	return c, l, nil
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
	if r, ok := rule.As(err); ok {
		sentinel := a2a.ErrInvalidParams
		switch r.Code {
		case rule.NotFound, CodeNoSuchSession:
			sentinel = a2a.ErrTaskNotFound
		case rule.Forbidden:
			sentinel = a2a.ErrUnauthorized
		case CodeDamaged: // the server's copy, not the request, is at fault
			sentinel = a2a.ErrInternalError
		}
		return a2a.NewError(sentinel, r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": r.Field, "rule": r.Rule})
	}
	var ie *ledger.IdempotencyError
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

// PromiseTask is the A2A task GetTask answers for id in st at now: the
// promise whose task field is id, else the promise with that id; its record
// rides in metadata under each of keys (none given: cfg's promise URI).
// contextID is the session's ("tenant/session"). The bool is false when no
// promise has that task id. This is the mapping `tally a2a task` prints.
func PromiseTask(cfg A2AConfig, st *ledger.State, id string, now time.Time, contextID string, keys ...string) (*a2a.Task, bool) {
	p, ok := a2atask.FindPromise(st.Promises, id)
	if !ok {
		return nil, false
	}
	if len(keys) == 0 {
		keys = []string{cfg.uris().Promise}
	}
	v := st.Promises.View(p, now)
	return a2atask.PromiseTask(&v, contextID, keys), true
}

// GetTask returns the task of a promise, of a claim, or of an origin of
// expectations (originTask), looked up in that order.
func (h *a2aHandler) GetTask(ctx context.Context, req *a2a.GetTaskRequest) (*a2a.Task, error) {
	c, l, err := h.taskCall(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	now := h.s.cfg.Ledger.Now()
	var t *a2a.Task
	l.Read(func(st *ledger.State) {
		if p, ok := a2atask.FindPromise(st.Promises, string(req.ID)); ok {
			v := st.Promises.View(p, now)
			t = a2atask.PromiseTask(&v, c.contextID(), h.keysOf(c, a2atask.FamilyPromise))
		} else if v, ok := st.Claims.Claim(string(req.ID), now.UTC()); ok {
			t = a2atask.ClaimTask(&v, c.contextID(), h.keysOf(c, a2atask.FamilyClaim), c.sessionURL)
		} else if a2atask.IsOrigin(st.Expects, string(req.ID)) {
			t = a2atask.OriginTask(st.Expects, string(req.ID), c.contextID(), h.keysOf(c, a2atask.FamilyExpect))
		}
	})
	if t == nil {
		return nil, a2a.NewError(a2a.ErrTaskNotFound, "no task "+string(req.ID)+" in session "+c.contextID())
	}
	return t, nil
}

// ListTasks lists the session's promises as tasks in declaration order,
// then its claims in creation order; the page token is the offset of the
// page's first task.
func (h *a2aHandler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	c, l, err := h.call(ctx)
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
	if err := l.Refresh(); err != nil {
		return nil, a2aError(err)
	}
	resp := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size}
	if req.ContextID != "" && req.ContextID != c.contextID() {
		return resp, nil
	}
	now := h.s.cfg.Ledger.Now()
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
	l.Read(func(st *ledger.State) {
		st.Promises.Each(func(p *promise.Promise) bool {
			v := st.Promises.View(p, now)
			keep(a2atask.PromiseTask(&v, c.contextID(), promiseKeys))
			return true
		})
		for _, sm := range st.Claims.List(claim.Filter{}, now.UTC()) {
			if v, ok := st.Claims.Claim(sm.Claim, now.UTC()); ok {
				keep(a2atask.ClaimTask(&v, c.contextID(), claimKeys, c.sessionURL))
			}
		}
	})
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
	c, l, err := h.taskCall(ctx, req.ID)
	if err != nil {
		return nil, err
	}
	var family a2atask.Family
	var id, as, resolved string
	l.Read(func(st *ledger.State) {
		if p, ok := a2atask.FindPromise(st.Promises, string(req.ID)); ok {
			family, id, as = a2atask.FamilyPromise, p.ID, promise.AsCancelled
			if c.p.actor == p.To && c.p.actor != p.By {
				as = promise.AsReleased
			}
			if p.Resolution != nil {
				resolved = p.Resolution.As
			}
		} else if _, ok := st.Claims.Claim(string(req.ID), time.Time{}); ok {
			family = a2atask.FamilyClaim
		} else if a2atask.IsOrigin(st.Expects, string(req.ID)) {
			family = a2atask.FamilyExpect
		}
	})
	reason := a2atask.CancelReason(c.cancelRequestMetadata(req), h.keysOf(c, a2atask.FamilyPromise))
	switch {
	case family == a2atask.FamilyClaim:
		return h.cancelClaim(ctx, c, l, req)
	case family == a2atask.FamilyExpect:
		return h.cancelOrigin(ctx, c, l, string(req.ID))
	case family == "":
		return nil, a2a.NewError(a2a.ErrTaskNotFound, "no task "+string(req.ID)+" in session "+c.contextID())
	case resolved != "":
		return nil, a2a.NewError(a2a.ErrTaskNotCancelable, "promise "+id+" is already resolved as "+resolved)
	case as == promise.AsCancelled && strings.TrimSpace(reason) == "":
		return nil, a2atask.InvalidParams("reason", "cancelling a promise needs a reason: put it in the request's metadata.reason")
	}
	cmd := promise.Resolve{ID: id, As: as, Reason: reason}
	digest := a2aDigest("CancelTask", c.contextID(), id, as, reason)
	return h.execute(ctx, c, l, ledger.Command{Promise: cmd}, c.requestID, digest, id, h.keysOf(c, a2atask.FamilyPromise))
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
	c, l, err := h.callFor(ctx, true)
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
			WithDetails(map[string]any{"code": string(rule.Invalid), "field": "A2A-Extensions", "rule": "activate " + uri})
	}
	switch fam, _ := h.s.cfg.A2A.uris().FamilyOf(uri); fam {
	case a2atask.FamilyExpect:
		return h.sendExpect(ctx, c, l, req, uri, key, raw)
	case a2atask.FamilyClaim:
		return h.sendClaim(ctx, c, l, req, uri, key, raw)
	}
	cmd, id, err := h.promiseCommand(c, l, msg, key, raw)
	if err != nil {
		return nil, err
	}
	rid := c.sendRequestID(msg)
	canon, _ := json.Marshal(raw)
	digest := a2aDigest("SendMessage", c.contextID(), uri, string(msg.TaskID), string(canon))
	return h.execute(ctx, c, l, ledger.Command{Promise: cmd}, rid, digest, id, []string{a2atask.RecordKey(uri, a2atask.FamilyPromise)})
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

// promiseCommand decodes a promise record (pinki's shape, plus an optional
// "action": declare (default), amend, resolve or assess) into a command.
// The acting identity is always the caller's; the returned id is the
// promise the command is about ("" for a declaration that mints its id).
func (h *a2aHandler) promiseCommand(c *a2aCall, l *ledger.Ledger, msg *a2a.Message, key string, raw any) (promise.Command, string, error) {
	rec, err := a2atask.ReadRecord(a2atask.PromiseActions(), key, raw, "a promise record")
	if err != nil {
		return nil, "", err
	}
	where, action := rec.Where, rec.Action.Name
	refuse := func(err error) error {
		if r, ok := rule.As(err); ok {
			return a2a.NewError(a2a.ErrInvalidParams, where+"."+r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": r.Field, "rule": r.Rule})
		}
		return a2aError(err)
	}
	body, err := rec.Body(nil)
	if err != nil {
		return nil, "", err
	}
	var (
		declare api.PromiseDeclare
		amend   api.PromiseAmend
		resolve api.PromiseResolve
		assess  api.PromiseAssess
		doc     any
		id      *string // the document's promise id
	)
	switch action {
	case "declare":
		doc, id = &declare, &declare.ID
	case "amend":
		doc, id = &amend, &amend.ID
	case "resolve":
		doc, id = &resolve, &resolve.ID
	default:
		doc, id = &assess, &assess.ID
	}
	if err := api.Decode(where, body, doc); err != nil {
		return nil, "", refuse(err)
	}
	if action != "declare" && *id == "" {
		if msg.TaskID == "" {
			return nil, "", a2atask.InvalidParams(where+".id", "names the promise to "+action+" (or send the message in its task: message.taskId)")
		}
		if err := l.Refresh(); err != nil {
			return nil, "", a2aError(err)
		}
		l.Read(func(st *ledger.State) {
			if p, ok := a2atask.FindPromise(st.Promises, string(msg.TaskID)); ok {
				*id = p.ID
			}
		})
		if *id == "" {
			return nil, "", a2a.NewError(a2a.ErrTaskNotFound, "no task "+string(msg.TaskID)+" in session "+c.contextID())
		}
	}
	now := h.s.cfg.Ledger.Now()
	var cmd promise.Command
	switch action {
	case "declare":
		declare.Task = cmp.Or(declare.Task, string(msg.TaskID)) // the message's task, when it names none
		cmd, err = declare.Command(now)
	case "amend":
		cmd, err = amend.Command(now)
	case "resolve":
		cmd = resolve.Command()
	default:
		cmd = assess.Command()
	}
	if err != nil {
		return nil, "", refuse(err)
	}
	return cmd, *id, nil
}

// a2aDigest binds a request id to what an A2A call asked.
func a2aDigest(parts ...string) [32]byte {
	h := blake3.NewDeriveKey("tally 2026-11 a2a request digest v1")
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return sum
}

// execute runs a promise command as the caller, idempotently under rid, and
// returns the task of the promise as it stood after the write (the
// recorded task on a retry).
func (h *a2aHandler) execute(ctx context.Context, c *a2aCall, l *ledger.Ledger, cmd ledger.Command, rid string, digest [32]byte, id string, keys []string) (*a2a.Task, error) {
	render := func(st *ledger.State, res []ledger.Result) []byte {
		pid := id
		if pid == "" && len(res) > 0 {
			pid = res[0].Event.ID
		}
		p, ok := st.Promises.Get(pid)
		if !ok {
			return []byte("{}")
		}
		v := st.Promises.View(p, h.s.cfg.Ledger.Now())
		t := a2atask.PromiseTask(&v, c.contextID(), keys)
		if len(res) > 0 {
			a2atask.WithWarnings(t, keys, res[0].Warnings)
		}
		b, _ := json.Marshal(t)
		return b
	}
	resp, err := h.write(ctx, c, l, cmd, rid, digest, render)
	if err != nil {
		return nil, a2aError(err)
	}
	return decodeAnswer[a2a.Task](resp)
}

// write runs cmd as the caller and returns render's answer from the state
// the write left. With a request id it is idempotent: a retry with the same
// id and digest gets the recorded answer and appends nothing; the same id
// with another digest is a conflict. The ledger's error is returned as it
// is, for the caller to map.
func (h *a2aHandler) write(ctx context.Context, c *a2aCall, l *ledger.Ledger, cmd ledger.Command, rid string, digest [32]byte, render func(*ledger.State, []ledger.Result) []byte) ([]byte, error) {
	if len(rid) > 256 {
		return nil, a2atask.InvalidParams("messageId", "a request id is at most 256 bytes")
	}
	actor, err := h.s.writeActor(c.p, cmd)
	if err != nil {
		return nil, err
	}
	opts := ledger.WriteOptions{Actor: actor, RequestID: rid, Render: render}
	var idem *ledger.Idempotency
	if rid != "" {
		idem = &ledger.Idempotency{Principal: actor, Key: rid, Digest: digest, Render: render}
	}
	_, resp, _, err := l.Execute(ctx, cmd, opts, idem)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// a2aAnswer is what a write answers with: a task, or a message.
type a2aAnswer interface{ a2a.Task | a2a.Message }

// decodeAnswer reads back a rendered (or recorded) answer.
func decodeAnswer[T a2aAnswer](resp []byte) (*T, error) {
	var v T
	if err := json.Unmarshal(resp, &v); err != nil {
		return nil, fmt.Errorf("%w: the recorded response is not a task or message: %v", a2a.ErrInternalError, err)
	}
	var id string
	switch x := any(&v).(type) {
	case *a2a.Task:
		id = string(x.ID)
	case *a2a.Message:
		id = x.ID
	}
	if id == "" {
		return nil, fmt.Errorf("%w: the recorded response has no id", a2a.ErrInternalError)
	}
	return &v, nil
}

// cancelError maps a refused cancellation: a conflict (the record already
// ended) is NotCancelable, anything else as a2aError.
func cancelError(err error) error {
	if r, ok := rule.As(err); ok && r.Code == rule.Conflict {
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
