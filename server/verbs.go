package server

import (
	"encoding/json"
	"net/http"
	"reflect"

	"tally/api"
	"tally/service"
	"tally/verb"
)

// The REST routes of the verb table: a route's name, method, pattern,
// summary, body schema, write flag and success status are its verb's
// (package verb); what is left here is how each reads its request from
// HTTP and answers, the endpoint of the verb by its name.

// verbEndpoint is how the server answers one verb: serve, a document
// (given the verb, whose status and call it may use), or stream, an
// answer written as it goes; bodyMax and media as in route.
type verbEndpoint struct {
	serve   func(v verb.Verb) endpoint
	stream  http.HandlerFunc
	bodyMax int64
	media   string
}

// verbRoutes are the routes of every verb of the table that has one,
// in the table's order. A write whose body is its document and a read
// by GET that name no endpoint here are the table's (tableDefault,
// tableRead); any other verb without one is a broken build, refused by
// the first test that starts a server (and named by TestVerbRoutes).
func (s *Server) verbRoutes() []route {
	eps := s.verbEndpoints()
	var out []route
	for _, v := range verb.Table() {
		if v.HTTP.Path == "" {
			continue
		}
		e, ok := eps[v.Name]
		switch {
		case ok:
		case v.Effect != verb.Read && v.HTTP.Body != "" && v.HTTP.Body != verb.BodyBytes:
			e = verbEndpoint{serve: tableDefault(s)}
		case v.Effect == verb.Read && v.HTTP.Method == "GET" && !v.HTTP.Stream:
			e = verbEndpoint{serve: tableRead(s)}
		default:
			panic("server: verb " + v.Name + " has a route in the table and no endpoint")
		}
		rt := route{name: v.Name, method: v.HTTP.Method, pattern: v.HTTP.Path, summary: v.Summary, body: v.HTTP.Body,
			write: v.Effect != verb.Read, bodyMax: e.bodyMax, media: e.media, stream: e.stream}
		if e.serve != nil {
			rt.serve = e.serve(v)
		}
		out = append(out, rt)
	}
	return out
}

// statusOf is a verb's success status.
func statusOf(v verb.Verb) int {
	if v.HTTP.Status == 0 {
		return http.StatusOK
	}
	return v.HTTP.Status
}

// doc is an endpoint that needs nothing of its verb.
func doc(e endpoint) func(verb.Verb) endpoint { return func(verb.Verb) endpoint { return e } }

// tableWrite is a write route whose body is the api document D, read by
// in and run by the verb's Call with the path's arguments.
func tableWrite[D any](s *Server, in docRule[D]) func(verb.Verb) endpoint {
	return func(v verb.Verb) endpoint {
		return apiWrite(s, statusOf(v), in, func(r *http.Request, c service.Call, d *D) (service.Doc, error) {
			return v.Call(r.Context(), s.local, c, verb.Input{Doc: *d, Path: pathArgs(r, v)})
		})
	}
}

// tableDefault is the endpoint of a write whose body is its request
// document (the table's Request), the members its path names set from
// the path, run by its Call: every write the server names no endpoint
// for.
func tableDefault(s *Server) func(verb.Verb) endpoint {
	return func(v verb.Verb) endpoint {
		decode := func(_ *http.Request, body []byte) (any, error) {
			d := reflect.New(v.Request).Interface()
			return d, api.Decode("body", body, d)
		}
		return docWrite(s, statusOf(v), false, v.HTTP.Members, decode, func(r *http.Request, c service.Call, d any) (service.Doc, error) {
			return v.Call(r.Context(), s.local, c, verb.Input{Doc: d, Path: pathArgs(r, v)})
		})
	}
}

// tableRead is the endpoint of a read whose request is the table's (its
// Request): its query parameters (an api.Query) and the members its path
// names, run by its Call at the now the query names: every read the
// server names no endpoint for.
func tableRead(s *Server) func(verb.Verb) endpoint {
	return func(v verb.Verb) endpoint {
		return func(r *http.Request) (int, any, error) {
			c, err := s.readCall(r)
			if err != nil {
				return 0, nil, err
			}
			d := reflect.New(v.Request).Interface()
			if q, ok := d.(api.Query); ok {
				if err := api.DecodeQuery(r.URL.Query(), q); err != nil {
					return 0, nil, err
				}
			}
			if len(v.HTTP.Members) > 0 {
				path, err := withPathMembers(r, nil, v.HTTP.Members)
				if err == nil {
					err = json.Unmarshal(path, d)
				}
				if err != nil {
					return 0, nil, err
				}
			}
			doc, err := v.Call(r.Context(), s.local, c, verb.Input{Doc: d, Path: pathArgs(r, v)})
			return statusOf(v), doc.JSON, err
		}
	}
}

// serviceWrite is a write route whose body is the api document D, run by
// run (a rule of this binding's first, then the Service).
func serviceWrite[D any](s *Server, in docRule[D], run func(r *http.Request, c service.Call, d *D) (service.Doc, error)) func(verb.Verb) endpoint {
	return func(v verb.Verb) endpoint { return apiWrite(s, statusOf(v), in, run) }
}

// pathArgs are the values of the verb's path parameters in r.
func pathArgs(r *http.Request, v verb.Verb) []string {
	params := v.Params()
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = r.PathValue(p)
	}
	return out
}

// verbEndpoints are the endpoints of the table's verbs, by name.
func (s *Server) verbEndpoints() map[string]verbEndpoint {
	return map[string]verbEndpoint{
		verb.PromiseDeclare: {serve: serviceWrite(s, docRule[api.PromiseDeclare]{}, s.declare)},
		verb.PromiseAmend:   {serve: tableWrite(s, docRule[api.PromiseAmend]{id: amendID})},
		verb.PromiseResolve: {serve: tableWrite(s, docRule[api.PromiseResolve]{id: resolveID})},
		verb.PromiseAssess:  {serve: tableWrite(s, docRule[api.PromiseAssess]{id: assessID})},

		verb.ClaimCheckEvidence: {serve: doc(s.claimReportWithEvidence), bodyMax: ArtifactBodyMax},
		verb.ClaimArtifactPut:   {serve: doc(s.claimArtifactPut), bodyMax: ArtifactBodyMax},
		verb.ClaimArtifactGet:   {stream: s.claimArtifactGet},
		verb.ArtifactList:       {serve: doc(s.artifactList)},
		verb.ArtifactContent:    {stream: s.contentGet},

		verb.ExpectRaise:     {serve: serviceWrite(s, docRule[api.ExpectRaise]{}, s.expectRaise)},
		verb.ExpectList:      {serve: doc(s.expectList)},
		verb.ExpectShow:      {serve: doc(s.expectShow)},
		verb.ExpectWithdraw:  {serve: tableWrite(s, docRule[api.ExpectWithdraw]{empty: true})},
		verb.ExpectSupersede: {serve: serviceWrite(s, docRule[api.ExpectRaise]{empty: true}, s.expectSupersede)},
		verb.ExpectTask:      {serve: doc(s.expectTaskOrigin)},
		verb.ExpectLapses:    {serve: doc(s.expectLapses)},

		verb.SessionExport: {stream: s.export},
		verb.SessionVerify: {serve: doc(s.verify)},
		verb.Verify:        {serve: doc(s.verifyAll)},
		verb.SessionImport: {serve: doc(s.importLog), bodyMax: ImportBodyMax},
	}
}
