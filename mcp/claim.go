package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/service"
	"tally/vocab"
)

func claimTools(readPaths bool) []tool {
	publish := bytesArgs("content", "the artifact's bytes", readPaths)
	evidence := bytesArgs("evidence", "the verdict's evidence, stored and published as the evaluator's result artifact named by evidence", readPaths)
	return []tool{
		write("tally_claim_create", "Create a claim",
			"Issue a claim as its claimant: the respondent owes the work, each slot a named output whose checks name their evaluators. Refused when the claim id is taken.",
			appends, service.Service.CreateClaim).needs("claim", "work"),
		write("tally_claim_post", "Post a claim",
			"Make a created claim actionable (or record that posting failed, failed: true). Only the claimant may post.",
			appends, service.Service.PostClaim),
		write("tally_claim_cancel", "Cancel a claim",
			"End a claim as Cancelled, for good. Only the claimant may, and not once it is terminal.",
			destructive, service.Service.CancelClaim),
		write("tally_claim_revoke", "Revoke a claim's work",
			"Withdraw the work from its receipt holder: Revoked, for good. Only the claimant may.",
			destructive, service.Service.RevokeClaim),
		write("tally_claim_supersede", "Supersede a claim",
			"End a claim in favour of its successor claim, for good. Only the claimant may.",
			destructive, service.Service.SupersedeClaim),
		write("tally_claim_receipt_acquire", "Acquire the execution receipt",
			"Take the claim's execution receipt to do its work (or decline it, decline: true). Only the respondent may, once the claim is posted.",
			appends, service.Service.AcquireReceipt),
		write("tally_claim_receipt_adopt", "Move the receipt",
			"Move the execution receipt to a new holder. Only the claimant may.",
			appends, service.Service.AdoptReceipt),
		write("tally_claim_progress", "Record progress",
			"Record progress on the work under the receipt. Only its holder may, in the receipt's current generation.",
			appends, service.Service.RecordProgress),
		write("tally_claim_testament_close", "Close a testament",
			"Close the work cycle with a testament: its outcome and each slot bound to an artifact (role result: the claimant's result testament). Only the receipt holder closes a response testament.",
			appends, service.Service.CloseTestament).needs("claim"),
		write("tally_claim_testament_post", "Post a testament",
			"Post a closed testament to the other party. Only its author may.",
			appends, service.Service.PostTestament),
		write("tally_claim_testament_receive", "Receive a testament",
			"Record that the claimant received a posted response testament. Only the claimant may.",
			appends, service.Service.ReceiveTestament),
		writeBytes("tally_claim_artifact_publish", "Publish an artifact",
			"Publish an artifact of the work: its bytes as content_base64"+pathsSay(readPaths, "content_path")+". Only the receipt holder publishes work; an artifact id is published once.",
			appends, publish, func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
				if body == nil {
					return service.ClaimWritten{}, vocab.Invalidf("content_base64", "required: the artifact's bytes"+pathsSay(readPaths, "content_path"))
				}
				return svc.PublishArtifact(ctx, c, d, body)
			}),
		write("tally_claim_artifact_receive", "Receive an artifact",
			"Record that the claimant observed an artifact (at its digest). Only the claimant may.",
			appends, service.Service.ReceiveArtifact),
		write("tally_claim_check_begin", "Begin a check",
			"Begin an attempt of a check on one artifact; its stored bytes are verified first. Only the check's designated evaluator may.",
			appends, service.Service.BeginCheck),
		writeBytes("tally_claim_check_report", "Report a verdict",
			"Report a check's verdict (pass, fail, incomplete, error) on one artifact id and digest, with evidence bytes as evidence_base64"+pathsSay(readPaths, "evidence_path")+" if any. Only the check's designated evaluator may.",
			appends, evidence, func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimCheck, body io.Reader) (service.ClaimWritten, error) {
				var ev *service.Evidence
				if body != nil {
					ev = &service.Evidence{Body: body}
				}
				return svc.ReportCheck(ctx, c, d, ev)
			}),
		read("tally_claim_show", "Show a claim",
			"One claim with its state, slots, checks, receipt and testaments, and why it is not satisfied (why). Refused (not_found) for an unknown id.",
			plain(func(d *api.ClaimRef) string { return d.Claim }), service.Service.Claim),
		read("tally_claim_list", "List claims",
			"Claims by state, party and deadline, in creation order.",
			plain((*api.ClaimQuery).Filter), service.Service.ListClaims),
		read("tally_claim_graph", "The claim graph",
			"Every claim's state and every relation between claims (depends_on, awaits, reviews, derived_from, predecessor).",
			plain(func(*api.SessionQuery) struct{} { return struct{}{} }),
			func(svc service.Service, ctx context.Context, c service.Call, _ struct{}) (service.ClaimGraph, error) {
				return svc.ClaimGraph(ctx, c)
			}),
	}
}

// pathsSay names the path argument where the server reads paths.
func pathsSay(readPaths bool, name string) string {
	if !readPaths {
		return ""
	}
	return " or " + name + " (a file this server reads)"
}

// bytesArgs are the arguments that carry bytes: base64, and a path where
// the server may read one (tally mcp over stdio, on the caller's machine;
// never over HTTP). At most one of them.
func bytesArgs(prefix, what string, readPaths bool) []extra {
	out := []extra{{name: prefix + "_base64", schema: &jsonschema.Schema{Type: "string", ContentEncoding: "base64",
		Description: what + ", base64 (RFC 4648, standard alphabet)"}}}
	if readPaths {
		out = append(out, extra{name: prefix + "_path", schema: &jsonschema.Schema{Type: "string",
			Description: what + ", read from this file by the server (relative to its working directory)"}})
	}
	return out
}

// writeBytes is a write method that takes bytes beside its document D: m
// gets those the arguments carry (at most one of args), or nil.
func writeBytes[D, R any](name, title, description string, e effect, args []extra, m func(service.Service, context.Context, service.Call, D, io.Reader) (R, error)) tool {
	t := tool{name: name, title: title, description: description, effect: e,
		doc: reflect.TypeFor[D](), result: reflect.TypeFor[R](), extra: args}
	t.run = func(ctx context.Context, svc service.Service, c service.Call, body []byte, given map[string]string) (any, error) {
		d, err := decoded[D](body)
		if err != nil {
			return nil, err
		}
		var r io.Reader
		var from string
		for _, x := range args {
			v, ok := given[x.name]
			if !ok {
				continue
			}
			if from != "" {
				return nil, vocab.Invalidf(x.name, "give the bytes once: as "+from+" or as "+x.name)
			}
			from = x.name
			if x.schema.ContentEncoding == "base64" {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, vocab.Invalidf(x.name, "must be base64 (RFC 4648, standard alphabet, padded)")
				}
				r = bytes.NewReader(b)
				continue
			}
			f, err := os.Open(v)
			if err != nil {
				return nil, vocab.Invalidf(x.name, fmt.Sprintf("cannot be read: %v", err))
			}
			defer f.Close()
			r = f
		}
		return m(svc, ctx, c, d, r)
	}
	return t
}
