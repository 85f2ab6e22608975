package a2atask

import (
	"bytes"
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"tally/api"
	"tally/claim"
	"tally/expect"
	"tally/refuse"
	"tally/verb"
)

// InvalidParams is A2A's invalid-params error naming the field and the rule
// it breaks, with the details every binding gives a refusal.
func InvalidParams(field, msg string) error {
	return a2a.NewError(a2a.ErrInvalidParams, field+": "+msg).WithDetails(map[string]any{"code": string(refuse.Invalid), "field": field, "rule": msg})
}

// FindRecord finds the one tally record in a message's metadata: the URI
// it rides under, its key there, and the record as decoded. None, or two,
// is refused naming message.metadata.
func (u URIs) FindRecord(meta map[string]any) (uri, key string, raw any, err error) {
	for _, e := range u.Accepted() {
		for _, k := range RecordKeys(e.URI, e.Family) {
			v, ok := meta[k]
			if !ok {
				continue
			}
			if key != "" {
				return "", "", nil, InvalidParams("message.metadata", "carries two tally records (\""+key+"\" and \""+k+"\"); send one per message")
			}
			uri, key, raw = e.URI, k, v
		}
	}
	if key == "" {
		return "", "", nil, InvalidParams("message.metadata", "carries no tally record: put one under metadata[\""+u.Of(FamilyPromise)+"\"] (or another extension URI of the agent card) and activate that URI in the A2A-Extensions header")
	}
	return uri, key, raw, nil
}

// Record is a family's record read from a message's metadata: which of the
// family's api actions it names (C: the family's command; struct{} where
// the family decodes the record itself).
type Record[C any] struct {
	Where  string // metadata["<key>"], naming the record in refusals
	Obj    map[string]any
	Action api.Action[C]
}

// Body is the record without its "action" and with the members of set,
// as the action's api document.
func (r Record[C]) Body(set map[string]any) ([]byte, error) {
	obj := maps.Clone(r.Obj)
	delete(obj, "action")
	maps.Copy(obj, set)
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, InvalidParams(r.Where, "must be a JSON object")
	}
	return b, nil
}

// ReadRecord reads the record under key: a JSON object (what it is names
// it in the refusal) naming one of the actions (the default when it names
// none). An unknown action, or a member the action does not take, is
// refused by name.
func ReadRecord[C any](as api.Actions[C], key string, raw any, what string) (Record[C], error) {
	rec := Record[C]{Where: "metadata[\"" + key + "\"]", Action: as[0]}
	obj, ok := raw.(map[string]any)
	if !ok {
		return rec, InvalidParams(rec.Where, "must be a JSON object ("+what+")")
	}
	rec.Obj = obj
	if a, ok := obj["action"]; ok {
		name, _ := a.(string)
		act, ok := as.Find(name)
		if !ok {
			return rec, InvalidParams(rec.Where+".action", "must be one of "+strings.Join(as.Names(), ", "))
		}
		rec.Action = act
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if k != "action" && !slices.Contains(rec.Action.Members, k) {
			return rec, InvalidParams(rec.Where+"."+k, "is not a member of a "+rec.Action.Name+" record (members: "+strings.Join(rec.Action.Members, ", ")+")")
		}
	}
	return rec, nil
}

// PromiseActions are the promise records' actions: the verb table's
// promise verbs that A2A offers, declare (the default) first, their
// members api's promise documents'. A fresh table each call.
func PromiseActions() api.Actions[struct{}] {
	return tableActions[struct{}](verb.A2AActions("promise"), nil, nil)
}

// ClaimActions are the claim records' actions: the verb table's claim
// verbs that A2A offers, in its order, each built into the family's
// command as the REST route's document is (api.ClaimActions), create the
// default.
func ClaimActions() api.Actions[claim.Command] {
	return tableActions(verb.A2AActions("claim"), api.ClaimActions(), nil)
}

// ExpectActions are the expect records' actions, raise (the default)
// first; ExpectRecord decodes every member any of them takes, and a
// record names what REST names in the path (the expectation withdrawn,
// the task) as a member of its own.
func ExpectActions() api.Actions[struct{}] {
	return tableActions[struct{}](verb.A2AActions("expect"), nil, map[string][]string{
		"raise": {"expectationId", "kind", "subject", "expects", "satisfiedBy", "dueAt", "grace", "anchor",
			"after", "horizon", "basis", "supersedes", "origin", "replyTo", "by"},
		"withdraw": {"expectationId", "reason"},
		"outcome":  {"taskId", "outcome"},
	})
}

// tableActions are the actions of vs, in their order: each one's build
// from builds (by name), its members those of members (by name) or else
// its request document's. A verb the family cannot build is a broken
// table: it panics, in the first test that reads a record.
func tableActions[C any](vs []verb.Verb, builds api.Actions[C], members map[string][]string) api.Actions[C] {
	out := make(api.Actions[C], 0, len(vs))
	for _, v := range vs {
		a := api.Action[C]{Name: v.A2A, Members: members[v.A2A]}
		if builds != nil {
			b, ok := builds.Find(v.A2A)
			if !ok {
				panic("a2atask: verb " + v.Name + ": no " + v.A2A + " action to build")
			}
			a = b
		}
		if a.Members == nil {
			a.Members = api.Declared(reflect.New(v.Request).Interface())
		}
		out = append(out, a)
	}
	return out
}

// ExpectRecord is every member an expect record may carry; which are
// allowed depends on its action (ExpectActions).
type ExpectRecord struct {
	api.ExpectRaise        // its replyTo too
	Action          string `json:"action"`
	FactKey         string `json:"factKey"`
	At              string `json:"at"`
	Reason          string `json:"reason"`
	TaskID          string `json:"taskId"`
	Outcome         string `json:"outcome"`
}

// RecordClaim is the claim a claim record is about: its "claim" member,
// else the message's task. When both are given they must agree.
func RecordClaim(where string, obj map[string]any, task a2a.TaskID) (string, error) {
	v, given := obj["claim"]
	if !given {
		if task == "" {
			return "", InvalidParams(where+".claim", "names the claim (or send the message in its task: message.taskId)")
		}
		return string(task), nil
	}
	id, ok := v.(string)
	switch {
	case !ok:
		return "", InvalidParams(where+".claim", "must be a string")
	case task != "" && id != string(task):
		return "", InvalidParams(where+".claim", "names "+strconv.Quote(id)+" but message.taskId names "+strconv.Quote(string(task)))
	}
	return id, nil
}

// CancelReason is a CancelTask's reason: the request's metadata "reason",
// else the "reason" of a record under one of the family's keys.
func CancelReason(meta map[string]any, keys []string) string {
	if r, ok := meta["reason"].(string); ok && r != "" {
		return r
	}
	for _, k := range keys {
		if m, ok := meta[k].(map[string]any); ok {
			if r, ok := m["reason"].(string); ok {
				return r
			}
		}
	}
	return ""
}

// ReplyTo reads where a raise's lapses go: the record's replyTo, else the
// message metadata's "replyTo" (each a URL string or {"url","push":{"url",
// "token","authentication":{"scheme","credentials"}}}), with the request's
// push-notification config (its token and authentication too) when the
// record gives none. The field is the one read, for refusals.
func ReplyTo(record json.RawMessage, meta any, cfg *a2a.SendMessageConfig) (rt *expect.ReplyTo, field string, err error) {
	field = "replyTo"
	raw := record
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		raw = nil
		if meta != nil {
			raw, _ = json.Marshal(meta)
			field = "message.metadata.replyTo"
		}
	}
	if raw != nil {
		if rt, err = api.ParseReplyTo(field, raw); err != nil {
			return nil, field, err
		}
	}
	if cfg != nil && cfg.PushConfig != nil && cfg.PushConfig.URL != "" && (rt == nil || rt.PushURL == "") {
		if rt == nil {
			rt = &expect.ReplyTo{}
		}
		rt.PushURL, rt.PushToken = cfg.PushConfig.URL, cfg.PushConfig.Token
		if a := cfg.PushConfig.Auth; a != nil {
			rt.PushAuthScheme, rt.PushAuthCredentials = a.Scheme, a.Credentials
		}
	}
	return rt, field, nil
}
