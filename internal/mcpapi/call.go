package mcpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/agentapi"
)

// refusal is a refused call: the agent API's problem document (or one this
// package makes in the same shape), kept whole for the tool error.
type refusal struct {
	Status int
	Reason string
	Detail string
	doc    map[string]any
}

func refuse(status int, reason, format string, a ...any) *refusal {
	detail := fmt.Sprintf(format, a...)
	return &refusal{Status: status, Reason: reason, Detail: detail, doc: map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail, "reason": reason,
	}}
}

// invalid is a malformed argument, as the agent API reports one (422
// invalid-request naming the field).
func invalid(field, format string, a ...any) *refusal {
	r := refuse(http.StatusUnprocessableEntity, agentapi.ReasonInvalidRequest, format, a...)
	r.doc["field"] = field
	return r
}

// result is the tool error an MCP client sees: isError, a text naming the
// reason, and the problem document as structured content.
func (r *refusal) result(k string) *mcp.CallToolResult {
	doc := make(map[string]any, len(r.doc)+1)
	for n, v := range r.doc {
		doc[n] = v
	}
	if k != "" {
		doc["key"] = k
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: r.Reason + ": " + r.Detail}}, StructuredContent: doc}
}

// caller makes agent API requests for one tool call, with its caller's
// Authorization header, against one repository (owner/repo).
type caller struct {
	s     *service
	authz string
	repo  string
}

// call sends method path (under /repos/{owner}/{repo}) with a JSON body (or
// nil) to the agent API in process and decodes a success into out (when not
// nil). A problem document comes back as a refusal.
// A caller without a repository sends path as it is (/regions).
func (c caller) call(ctx context.Context, method, path string, query url.Values, body, out any) (int, *refusal) {
	u := path
	if c.repo != "" {
		owner, name, _ := strings.Cut(c.repo, "/")
		u = "/repos/" + url.PathEscape(owner) + "/" + url.PathEscape(name) + path
	}
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd *bytes.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, refuse(http.StatusInternalServerError, agentapi.ReasonInternal, "encode the request: %v", err)
		}
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	// The tool's context may carry the chi routing state of the HTTP
	// request that opened the session; the agent API's router must start
	// afresh.
	ctx = context.WithValue(ctx, chi.RouteCtxKey, (*chi.Context)(nil))
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, refuse(http.StatusInternalServerError, agentapi.ReasonInternal, "build the request: %v", err)
	}
	req.RequestURI = u
	req.RemoteAddr = "mcp"
	req.Header.Set("Authorization", c.authz)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	c.s.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 400 || isProblem(rec.header.Get("Content-Type")) {
		return rec.status, problemOf(rec.status, rec.buf.Bytes())
	}
	if out != nil && rec.buf.Len() > 0 {
		dec := json.NewDecoder(&rec.buf)
		dec.UseNumber()
		if err := dec.Decode(out); err != nil {
			c.s.log.Error("decode an agent API answer", "method", method, "path", path, "err", err)
			return rec.status, refuse(http.StatusInternalServerError, agentapi.ReasonInternal, "warden could not read its own answer; see its log")
		}
	}
	return rec.status, nil
}

func isProblem(ct string) bool {
	mt, _, _ := mime.ParseMediaType(ct)
	return mt == "application/problem+json"
}

// problemOf reads a problem document.
func problemOf(status int, b []byte) *refusal {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil || doc == nil {
		return refuse(status, agentapi.ReasonInternal, "the agent API answered %d: %s", status, strings.TrimSpace(string(b)))
	}
	r := &refusal{Status: status, doc: doc}
	r.Reason, _ = doc["reason"].(string)
	r.Detail, _ = doc["detail"].(string)
	if r.Reason == "" {
		r.Reason = agentapi.ReasonInternal
	}
	return r
}

// recorder is the ResponseWriter of an in-process agent API request.
type recorder struct {
	header http.Header
	status int
	buf    bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.buf.Write(b)
}

// propertyRe finds the argument a schema validation error names.
var propertyRe = regexp.MustCompile(`/properties/([A-Za-z0-9_]+)`)

// refusalsCarryReasons is receiving middleware: a tool error that is not
// one of warden's refusals (the SDK's own, for arguments that do not match
// the tool's input schema or do not decode) becomes one, 422
// invalid-request naming the argument, as the agent API refuses a
// malformed body. Every tool error then carries a reason.
func refusalsCarryReasons(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		r, ok := res.(*mcp.CallToolResult)
		if err != nil || !ok || r == nil || !r.IsError || r.StructuredContent != nil {
			return res, err
		}
		var text []string
		for _, c := range r.Content {
			if t, ok := c.(*mcp.TextContent); ok {
				text = append(text, t.Text)
			}
		}
		detail := strings.Join(text, "; ")
		if detail == "" {
			detail = "the arguments were refused"
		}
		field := "arguments"
		if m := propertyRe.FindStringSubmatch(detail); m != nil {
			field = m[1]
		}
		return invalid(field, "%s", detail).result(""), nil
	}
}
