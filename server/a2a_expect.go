package server

// Expectations over A2A. A SendMessage carrying a record in
// metadata[<expect URI>] (tally's expect URI or the draft's,
// https://rsaxb.com/a2a/expectations/v1, activated in A2A-Extensions) acts
// on the expectations family as the caller. The record's "action":
//
//	raise (default)  the draft's expectation document (as POST …/expectations
//	                 takes it), plus "replyTo": where the timekeeper sends its
//	                 lapses — a URL string (the agent's JSON-RPC endpoint or
//	                 its agent card's URL) or {"url","push":{"url","token"}}.
//	                 origin defaults to the message's taskId and contextId;
//	                 replyTo defaults to message.metadata["replyTo"], and a
//	                 push config to the request's
//	                 configuration.taskPushNotificationConfig. With
//	                 "supersedes" it extends that expectation (terms not
//	                 given are inherited).
//	fact             {"factKey","subject":{"type","id"},"at"?}
//	withdraw         {"expectationId","reason"?}
//	outcome          {"taskId"? (default: the message's taskId),
//	                 "outcome": completed|cancelled|failed}; cancelled and
//	                 failed withdraw the expectations raised on the task.
//
// The answer is a Message (expectations are not tasks of this agent) in the
// request's context, referencing its task, with the resulting document
// under the same key: {"schema_version","seq","expectation"|"fact"|"task",…}.
//
// CancelTask on a task that is no promise's but the origin of expectations
// records the task's outcome cancelled, which withdraws them; GetTask on
// such a task shows them in metadata. Lapses go back to the raising agent
// from the timekeeper (timekeeper.A2A).

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/a2atask"
	"tally/api"
	"tally/expect"
	"tally/instant"
	"tally/refuse"
	"tally/service"
)

// sendExpect runs one expect record of a SendMessage through the Service
// with the action's api document under the message's request id, and
// answers with the write's response document. A raise's replyTo (the
// record's, the message metadata's or the request's push config) rides in
// the api document, so it is replicated like the rest of it.
func (h *a2aHandler) sendExpect(ctx context.Context, c *a2aCall, req *a2a.SendMessageRequest, uri, key string, raw any) (a2a.SendMessageResult, error) {
	msg := req.Message
	rec, err := a2atask.ReadRecord(a2atask.ExpectActions(), key, raw, "an expectation record")
	if err != nil {
		return nil, err
	}
	where, obj, action := rec.Where, rec.Obj, rec.Action.Name
	body, _ := json.Marshal(obj)
	var d a2atask.ExpectRecord
	if err := api.Decode(where, body, &d); err != nil {
		return nil, refuseAt(where, err)
	}
	// The record is refused here, under its own name, for what its
	// document says; the Service refuses what the ledger's rules do.
	cmd, _, err := h.expectCommand(req, uri, &d)
	if err != nil {
		return nil, refuseAt(where, err)
	}
	rid := c.sendRequestID(msg)
	var party string
	switch cmd.(type) {
	case expect.RaiseCommand, expect.SupersedeCommand:
		party = d.By
	}
	call, err := h.writeCall(c, party, rid)
	if err != nil {
		return nil, err
	}
	var doc []byte
	switch oc := cmd.(type) {
	case expect.FactCommand:
		var res service.FactRecorded
		if res, err = h.s.local.RecordFact(ctx, call, api.ExpectFact{FactKey: d.FactKey, Subject: d.Subject, At: d.At}); err == nil {
			// The fact as A2A has always answered it: its key, subject and time.
			doc = expectDoc("seq", res.Seq, "fact", map[string]any{"factKey": res.Fact.FactKey, "subject": res.Fact.Subject, "at": instant.Format(res.Fact.At)})
		}
	case expect.WithdrawCommand:
		var res service.ExpectationWritten
		res, err = h.s.local.WithdrawExpectation(ctx, call, d.ExpectationID, api.ExpectWithdraw{Reason: d.Reason})
		doc = res.JSON
	case expect.TaskOutcomeCommand:
		var res service.TaskOutcomeRecorded
		res, err = h.s.local.RecordTaskOutcome(ctx, call, oc.TaskID, api.ExpectTaskOutcome{Outcome: d.Outcome})
		doc = res.JSON
	case expect.SupersedeCommand:
		var res service.ExpectationWritten
		res, err = h.s.local.SupersedeExpectation(ctx, call, d.Supersedes, d.ExpectRaise)
		doc = res.JSON
	default:
		var res service.ExpectationWritten
		res, err = h.s.local.RaiseExpectation(ctx, call, d.ExpectRaise)
		doc = res.JSON
	}
	if err != nil {
		return nil, a2aError(err)
	}
	return a2atask.ExpectReply(replyID(rid), msg.ContextID, msg.TaskID, uri, key, action, bytes.TrimSpace(doc)), nil
}

// replyID is the id of the message answering the request rid: the same
// for a retry.
func replyID(rid string) string {
	sum := a2aDigest("reply", rid)
	return "tally-" + hex.EncodeToString(sum[:12])
}

// refuseAt names a refusal's field inside the record.
func refuseAt(where string, err error) error {
	if r, ok := refuse.As(err); ok {
		field := r.Field
		if !strings.HasPrefix(field, where) {
			field = where + "." + field
		}
		return a2a.NewError(a2a.ErrInvalidParams, where+"."+r.Error()).WithDetails(map[string]any{"code": string(r.Code), "field": field, "rule": r.Rule})
	}
	return a2aError(err)
}

// expectCommand builds the command of an expect record, and the replyTo
// of a raise that names one.
func (h *a2aHandler) expectCommand(req *a2a.SendMessageRequest, uri string, d *a2atask.ExpectRecord) (expect.Command, *expect.ReplyTo, error) {
	msg := req.Message
	switch d.Action {
	case "fact":
		fd := api.ExpectFact{FactKey: d.FactKey, Subject: d.Subject, At: d.At}
		fc, err := fd.Command(api.ParseUTC)
		return fc, nil, err
	case "withdraw":
		wd := api.ExpectWithdraw{Reason: d.Reason}
		return wd.Command(d.ExpectationID), nil, nil
	case "outcome":
		task := d.TaskID
		if task == "" {
			task = string(msg.TaskID)
		}
		if task == "" {
			return nil, nil, refuse.Invalidf("taskId", "names the origin task (or send the message in it: message.taskId)")
		}
		od := api.ExpectTaskOutcome{Outcome: d.Outcome}
		oc := od.Command(task)
		switch oc.Outcome {
		case expect.OutcomeCompleted, expect.OutcomeCancelled, expect.OutcomeFailed:
		default:
			// Refused here, not by the core, to name the record's member.
			return nil, nil, refuse.Invalidf("outcome", "must be completed, cancelled or failed")
		}
		return oc, nil, nil
	}
	// raise or supersede
	if d.Origin == nil && msg.TaskID != "" {
		d.Origin = &expect.Origin{TaskID: string(msg.TaskID), ContextID: msg.ContextID}
	}
	rt, field, err := a2atask.ReplyTo(d.ReplyTo, msg.Metadata["replyTo"], req.Config)
	if err != nil {
		return nil, nil, err
	}
	if err := h.s.checkReplyTo(field, rt); err != nil {
		return nil, nil, err
	}
	if rt != nil {
		// The document carries where the lapses go, as the record will.
		rt.Extension = uri
		if d.ExpectRaise.ReplyTo, err = json.Marshal(rt); err != nil {
			return nil, nil, err
		}
	}
	if d.Supersedes != "" {
		c, err := d.Supersede()
		if err != nil {
			return nil, nil, err
		}
		c.Raise.ReplyTo = rt
		return c, rt, nil
	}
	rz, err := d.Raise()
	if err != nil {
		return nil, nil, err
	}
	rz.ReplyTo = rt
	return expect.RaiseCommand{Raise: rz}, rt, nil
}

// cancelOrigin records an origin task's outcome cancelled through the
// Service, withdrawing the expectations raised on it, and returns the task
// with them as they then stand.
func (h *a2aHandler) cancelOrigin(ctx context.Context, c *a2aCall, task string) (*a2a.Task, error) {
	call, err := h.writeCall(c, "", c.requestID)
	if err != nil {
		return nil, err
	}
	res, err := h.s.local.RecordTaskOutcome(ctx, call, task, api.ExpectTaskOutcome{Outcome: string(expect.OutcomeCancelled)})
	if err != nil {
		return nil, cancelError(err)
	}
	list, err := h.s.local.ListExpectations(ctx, h.readCall(c), expect.Filter{TaskID: task})
	if err != nil {
		return nil, a2aError(err)
	}
	return a2atask.OriginTaskOf(task, list.Expectations, expect.Outcome(res.Task.Outcome), true, c.contextID(), h.keysOf(c, a2atask.FamilyExpect)), nil
}
