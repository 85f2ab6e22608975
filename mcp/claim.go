package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"

	"github.com/google/jsonschema-go/jsonschema"

	"tally/api"
	"tally/refuse"
	"tally/service"
	"tally/verb"
)

func claimTools(readPaths bool) []tool {
	publish, evidence := bytesArgs("content", readPaths), bytesArgs("evidence", readPaths)
	return []tool{
		group("tally_claim", "Claims",
			"A claim's steps, each by its party.", claimArgs(),
			act("create", "Claimant: issue a claim."),
			act("post", "Claimant: make it actionable."),
			act("receipt.acquire", "Respondent: take the work."),
			act("receipt.adopt", "Claimant: give the receipt to another."),
			act("progress", "Holder: record progress."),
			writeBytes("artifact.publish", "", "Holder: publish its bytes ("+bytesSay("content", readPaths)+").",
				publish, func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimPublish, body io.Reader) (service.ClaimWritten, error) {
					if body == nil {
						return service.ClaimWritten{}, refuse.Invalidf("content_base64", "required: the artifact's bytes"+pathsSay(readPaths, "content_path"))
					}
					return svc.PublishArtifact(ctx, c, d, body)
				}),
			act("artifact.receive", "Claimant: saw an artifact."),
			act("testament.close", "Holder: end the work cycle (claimant: role result)."),
			act("testament.post", "Author: post it."),
			act("testament.receive", "Claimant: record it received."),
			act("check.begin", "Evaluator: begin a check."),
			writeBytes("check.report", "", "Evaluator: a verdict, evidence in "+bytesSay("evidence", readPaths)+".",
				evidence, func(svc service.Service, ctx context.Context, c service.Call, d api.ClaimCheck, body io.Reader) (service.ClaimWritten, error) {
					var ev *service.Evidence
					if body != nil {
						ev = &service.Evidence{Body: body}
					}
					return svc.ReportCheck(ctx, c, d, ev)
				}),
			act("cancel", "Claimant: end it for good."),
			act("revoke", "Claimant: take the work back, for good."),
			act("supersede", "Claimant: replace it, for good."),
		),
		group("tally_claim_read", "Read claims",
			"Claims as of now.", slices.Concat(claimArgs(), claimReadArgs()),
			act("show", "One claim, and why it is not satisfied."),
			act("list", "By state and party."),
			act("graph", "Every claim and relation."),
			artifactRead(),
		),
	}
}

// pathsSay names the path argument where the server reads paths.
func pathsSay(readPaths bool, name string) string {
	if !readPaths {
		return ""
	}
	return " or " + name + " (a file the server reads)"
}

// bytesSay names the arguments that carry bytes.
func bytesSay(prefix string, readPaths bool) string {
	if readPaths {
		return prefix + "_base64 or " + prefix + "_path"
	}
	return prefix + "_base64"
}

// bytesArgs are the arguments that carry bytes: base64, and a path where
// the server may read one (tally mcp over stdio, on the caller's machine;
// never over HTTP). At most one of them. The table describes them.
func bytesArgs(prefix string, readPaths bool) []extra {
	out := []extra{{name: prefix + "_base64", schema: &jsonschema.Schema{Type: "string", ContentEncoding: "base64"}}}
	if readPaths {
		out = append(out, extra{name: prefix + "_path", schema: &jsonschema.Schema{Type: "string"}})
	}
	return out
}

// writeBytes is a write method that takes bytes beside its document D: m
// gets those the arguments carry (at most one of args), or nil.
func writeBytes[D, R any](name, title, description string, args []extra, m func(service.Service, context.Context, service.Call, D, io.Reader) (R, error)) tool {
	t := tool{name: name, title: title, description: description, effect: verb.Write, doc: reflect.TypeFor[D](), extra: args}
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
				return nil, refuse.Invalidf(x.name, "give the bytes once: as "+from+" or as "+x.name)
			}
			from = x.name
			if x.schema.ContentEncoding == "base64" {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil {
					return nil, refuse.Invalidf(x.name, "must be base64 (RFC 4648, standard alphabet, padded)")
				}
				r = bytes.NewReader(b)
				continue
			}
			f, err := os.Open(v)
			if err != nil {
				return nil, refuse.Invalidf(x.name, fmt.Sprintf("cannot be read: %v", err))
			}
			defer f.Close()
			r = f
		}
		return m(svc, ctx, c, d, r)
	}
	return t
}
