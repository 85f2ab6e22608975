package verb

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"

	"tally/api"
	"tally/digest"
	"tally/refuse"
	"tally/service"
)

// The claim family's verbs.
const (
	ClaimCreate            = "claim.create"
	ClaimList              = "claim.list"
	ClaimShow              = "claim.show"
	ClaimPost              = "claim.post"
	ClaimCancel            = "claim.cancel"
	ClaimRevoke            = "claim.revoke"
	ClaimSupersede         = "claim.supersede"
	ClaimReceipt           = "claim.receipt"
	ClaimAdopt             = "claim.adopt"
	ClaimProgress          = "claim.progress"
	ClaimTestamentClose    = "claim.testament.close"
	ClaimTestamentPost     = "claim.testament.post"
	ClaimTestamentReceive  = "claim.testament.receive"
	ClaimDeadline          = "claim.deadline"
	ClaimDependency        = "claim.dependency"
	ClaimCheckBegin        = "claim.check.begin"
	ClaimCheckReport       = "claim.check.report"
	ClaimCheckEvidence     = "claim.check.report_evidence"
	ClaimArtifactPut       = "claim.artifact.put"
	ClaimArtifactGet       = "claim.artifact.get"
	ClaimArtifactVerify    = "claim.artifact.verify"
	ClaimArtifactReceive   = "claim.artifact.receive"
	ArtifactList           = "artifact.list"
	ArtifactContent        = "artifact.content"
	ClaimGraph             = "claim.graph"
	MethodReportEvidence   = "ReportCheckWithEvidence" // a verdict whose evidence bytes were staged; in the raft log: do not rename
	claimFamily            = "claim"
	claimPathMember        = "claim"
	claimTool, claimReader = "tally_claim", "tally_claim_read"
)

// ContentRef names bytes by their content digest (the objects route).
type ContentRef struct {
	Content string `json:"content"`
}

// claimA2ARank is a claim record action's place in the A2A order
// (A2ARank): the order the agent card lists them in.
func claimA2ARank(action string) int {
	return slices.Index([]string{"create", "post", "cancel", "revoke", "supersede", "receipt.acquire", "receipt.adopt", "progress",
		"testament.close", "testament.post", "testament.receive", "deadline.commit", "dependency.commit", "check.begin", "check.report",
		"artifact.publish", "artifact.receive"}, action)
}

func claimVerbs() []Verb {
	c := SessionPath + "/claims"
	one := c + "/{id}"
	w := func(name, summary string, e Effect, path, body string, members []string, a2a, mcpAction, cli, command string) Verb {
		rank := claimA2ARank(a2a)
		method := "POST"
		status := http.StatusOK
		if path == c {
			status = http.StatusCreated
		}
		return Verb{Name: name, Family: claimFamily, Summary: summary, Effect: e,
			HTTP: HTTP{Method: method, Path: path, Status: status, Body: body, Members: members}, A2A: a2a, A2ARank: rank,
			MCP: mcpOf(claimTool, mcpAction), CLI: cli, Command: command}
	}
	on := []string{claimPathMember}
	return []Verb{
		write(w(ClaimCreate, "Issue a claim as the authenticated claimant", Write, c, "ClaimCreate", nil, "create", "create", "claim create", service.MethodCreateClaim).party("claimant"),
			service.Service.CreateClaim),
		read(Verb{Name: ClaimShow, Family: claimFamily, Summary: "One claim: slots, checks, testaments, artifacts, relations (now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: one, Members: on}, MCP: MCP{Tool: claimReader, Action: "show"}, CLI: "claim show"},
			query(func(d api.ClaimRef) string { return d.Claim }), service.Service.Claim),
		read(Verb{Name: ClaimList, Family: claimFamily, Summary: "List claims (state=S repeatable, open, overdue, claimant, respondent, participant, now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: c}, MCP: MCP{Tool: claimReader, Action: "list"}, CLI: "claim ls"},
			query(api.ClaimQuery.Filter), service.Service.ListClaims),
		read(Verb{Name: ClaimGraph, Family: claimFamily, Summary: "Every claim's state and every relation between claims (now)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/claim-graph"}, MCP: MCP{Tool: claimReader, Action: "graph"}, CLI: "claim graph"},
			query(func(api.SessionQuery) struct{} { return struct{}{} }),
			func(svc service.Service, ctx context.Context, c service.Call, _ struct{}) (service.ClaimGraph, error) {
				return svc.ClaimGraph(ctx, c)
			}),
		write(w(ClaimPost, "Post a generated claim, or record that posting failed (claimant)", Write, one+"/post", "ClaimPost", on, "post", "post", "claim post", service.MethodPostClaim),
			service.Service.PostClaim),
		write(w(ClaimReceipt, "Acquire the execution receipt, or decline it (respondent)", Write, one+"/receipt", "ClaimReceipt", on, "receipt.acquire", "receipt.acquire", "receipt acquire", service.MethodAcquireReceipt),
			service.Service.AcquireReceipt),
		write(w(ClaimAdopt, "Move the receipt to a new holder at the next generation (claimant)", Write, one+"/adopt", "ClaimAdopt", on, "receipt.adopt", "receipt.adopt", "receipt adopt", service.MethodAdoptReceipt),
			service.Service.AdoptReceipt),
		write(w(ClaimProgress, "Record progress under the receipt (holder)", Write, one+"/progress", "ClaimProgress", on, "progress", "progress", "progress", service.MethodRecordProgress),
			service.Service.RecordProgress),
		withBytes(Verb{Name: ClaimArtifactPut, Family: claimFamily, Summary: "Store the body's bytes and publish the artifact (role, slot, generation, kind, schema, name in the query)", Effect: Write,
			HTTP: HTTP{Method: "PUT", Path: one + "/artifacts/{artifact}", Body: BodyBytes, Members: []string{claimPathMember, "artifact"}}, A2A: "artifact.publish", A2ARank: claimA2ARank("artifact.publish"),
			MCP: MCP{Tool: claimTool, Action: "artifact.publish"}, CLI: "artifact put", Command: service.MethodPublishArtifact},
			service.Service.PublishArtifact),
		stream(Verb{Name: ClaimArtifactGet, Family: claimFamily, Summary: "The artifact's bytes, verified against its recorded content digest", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: one + "/artifacts/{artifact}", Members: []string{claimPathMember, "artifact"}, Stream: true}, MCP: MCP{Tool: claimReader, Action: "artifact"}, CLI: "artifact get"},
			func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimArtifactRef) (service.ArtifactContent, error) {
				return svc.Artifact(ctx, c, d.Claim, d.Artifact)
			}),
		read(Verb{Name: ClaimArtifactVerify, Family: claimFamily, Summary: "Re-hash the artifact's stored copy: its row when intact, else the refusal reading it would give", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: one + "/artifacts/{artifact}/verify", Members: []string{claimPathMember, "artifact"}}, CLI: "artifact verify"},
			query(func(d api.ClaimArtifactRef) api.ClaimArtifactRef { return d }),
			func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimArtifactRef) (service.ArtifactList, error) {
				return svc.VerifyArtifact(ctx, c, d.Claim, d.Artifact)
			}),
		read(Verb{Name: ArtifactList, Family: claimFamily, Summary: "Recorded artifacts and whether their bytes are stored (claim, artifact); verify=true re-hashes each copy (ok, missing, damaged)", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/artifacts"}, CLI: "artifact ls"},
			query(func(q api.ArtifactQuery) service.ArtifactQuery { return q }), service.Service.ListArtifacts),
		stream(Verb{Name: ArtifactContent, Family: claimFamily, Summary: "Bytes by content digest, served only when an artifact of this session records that content", Effect: Read,
			HTTP: HTTP{Method: "GET", Path: SessionPath + "/objects/{content}", Members: []string{"content"}, Stream: true}, CLI: "artifact get"},
			func(svc service.Service, ctx context.Context, c service.Call, d ContentRef) (service.ArtifactContent, error) {
				cd, err := digest.ParseContentDigest(d.Content)
				if err != nil {
					return service.ArtifactContent{}, refuse.Invalidf("content", "must be a content digest (64 hex digits)")
				}
				return svc.Content(ctx, c, cd)
			}),
		write(w(ClaimArtifactReceive, "Record that the claimant observed an artifact (claimant)", Write, one+"/artifacts/{artifact}/receive", "ClaimArtifactReceive", []string{claimPathMember, "artifact"}, "artifact.receive", "artifact.receive", "artifact receive", service.MethodReceiveArtifact),
			service.Service.ReceiveArtifact),
		write(w(ClaimTestamentClose, "Close the work cycle (holder), the claimant's result testament, or a failed one", Write, one+"/testaments", "ClaimTestament", on, "testament.close", "testament.close", "testament close", service.MethodCloseTestament),
			service.Service.CloseTestament),
		write(w(ClaimTestamentPost, "Post a closed testament (its author)", Write, one+"/testaments/{testament}/post", "ClaimTestamentRef", []string{claimPathMember, "testament"}, "testament.post", "testament.post", "testament post", service.MethodPostTestament),
			service.Service.PostTestament),
		write(w(ClaimTestamentReceive, "Receive a posted response testament (claimant)", Write, one+"/testaments/{testament}/receive", "ClaimTestamentRef", []string{claimPathMember, "testament"}, "testament.receive", "testament.receive", "testament receive", service.MethodReceiveTestament),
			service.Service.ReceiveTestament),
		write(w(ClaimCheckBegin, "Begin the next attempt of a check on one target (designated evaluator)", Write, one+"/checks/{check}/begin", "ClaimBegin", []string{claimPathMember, "check"}, "check.begin", "check.begin", "check begin", service.MethodBeginCheck),
			service.Service.BeginCheck),
		write(w(ClaimCheckReport, "Report a verdict with evidence (designated evaluator)", Write, one+"/checks/{check}/report", "ClaimCheck", []string{claimPathMember, "check"}, "check.report", "check.report", "check report", service.MethodReportCheck),
			func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimCheck) (service.ClaimWritten, error) {
				return svc.ReportCheck(ctx, c, d, nil)
			}),
		withBytes(Verb{Name: ClaimCheckEvidence, Family: claimFamily, Summary: "Store the body's bytes as the evaluator's evidence and report the verdict citing it, in one write (artifact, digest, result, note, evidence, kind, schema, name in the query)", Effect: Write,
			HTTP: HTTP{Method: "PUT", Path: one + "/checks/{check}/report", Body: BodyBytes, Members: []string{claimPathMember, "check"}}, CLI: "check report", Command: MethodReportEvidence},
			func(svc service.Service, ctx context.Context, c service.Call, d Evidence, body io.Reader) (service.ClaimWritten, error) {
				return svc.ReportCheck(ctx, c, d.Check, &service.Evidence{Name: d.Name, Kind: d.Kind, Schema: d.Schema, Body: body})
			}),
		write(w(ClaimCancel, "End a claim: Cancelled (claimant)", Destructive, one+"/cancel", "ClaimEnd", on, "cancel", "cancel", "claim cancel", service.MethodCancelClaim),
			service.Service.CancelClaim),
		write(w(ClaimRevoke, "Withdraw the work from its holder: Revoked (claimant)", Destructive, one+"/revoke", "ClaimEnd", on, "revoke", "revoke", "claim revoke", service.MethodRevokeClaim),
			service.Service.RevokeClaim),
		write(w(ClaimSupersede, "End a claim in favour of its successor (claimant)", Destructive, one+"/supersede", "ClaimSupersede", on, "supersede", "supersede", "claim supersede", service.MethodSupersedeClaim),
			service.Service.SupersedeClaim),
		write(w(ClaimDeadline, "Commit the claim's passed deadline: Expired, or Deadlocked for a wait-cycle's victim (timekeeper)", Write, one+"/deadline", "ClaimRef", on, "deadline.commit", "", "", service.MethodCommitDeadline),
			service.Service.CommitDeadline),
		write(w(ClaimDependency, "Commit the DependencyFailed fact of a claim whose dependency ended unsatisfied (any participant; the fact is checked)", Write, one+"/dependency", "ClaimRef", on, "dependency.commit", "", "", service.MethodCommitDependency),
			service.Service.CommitDependency),
	}
}

// party sets v's party member.
func (v Verb) party(member string) Verb {
	v.Party = member
	return v
}

// mcpOf is a tool's action, or no place among the tools for action "".
func mcpOf(tool, action string) MCP {
	if action == "" {
		return MCP{}
	}
	return MCP{Tool: tool, Action: action}
}

// withBytes is a write that takes bytes beside its document D (the body
// of a PUT). A cluster stages the bytes before it proposes the command,
// so the command is the cluster's to run (Apply is nil).
func withBytes[D any, R result](v Verb, m func(service.Service, context.Context, service.Call, D, io.Reader) (R, error)) Verb {
	v.Request, v.Response = reflect.TypeFor[D](), reflect.TypeFor[R]()
	v.Call = func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error) {
		d, err := docIn[D](v.Name, in)
		if err != nil {
			return service.Doc{}, err
		}
		r, err := m(svc, ctx, c, d, in.Body)
		return r.Document(), err
	}
	return v
}

// stream is a read whose answer is bytes (service.ArtifactContent): its
// Call reads them whole, as the document it answers.
func stream[D any](v Verb, m func(service.Service, context.Context, service.Call, D) (service.ArtifactContent, error)) Verb {
	v.Request, v.Response = reflect.TypeFor[D](), reflect.TypeFor[service.ArtifactContent]()
	v.Call = func(ctx context.Context, svc service.Service, c service.Call, in Input) (service.Doc, error) {
		d, err := docIn[D](v.Name, in)
		if err != nil {
			return service.Doc{}, err
		}
		ac, err := m(svc, ctx, c, d)
		if err != nil {
			return service.Doc{}, err
		}
		defer ac.Body.Close()
		b, err := io.ReadAll(ac.Body)
		if err != nil {
			return service.Doc{}, fmt.Errorf("%s: %w", v.Name, err)
		}
		return service.Doc{JSON: b}, nil
	}
	return v
}
