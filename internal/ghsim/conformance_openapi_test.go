package ghsim

// The simulator against GitHub's REST description (@octokit/openapi,
// generated/api.github.com.json): every route it serves must be an operation
// there (TestConformanceRoutesInOpenAPI), and every answer it gave during the
// package's tests must match the operation's documented response schema
// (confValidateExchanges, run by TestMain after the tests).
//
// Routes are matched to the description by shape: literal segments equal,
// a parameter segment ({number}, a chi wildcard *) matching any parameter
// ({issue_number}, {path}). The 13 MB description is read once; only the
// operations the simulator serves (and the components they reference) are
// handed to kin-openapi, which keeps loading fast even under -race.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/go-chi/chi/v5"
	"github.com/wardenhq/warden/internal/corpus"
)

// confRoute is one route the simulator serves.
type confRoute struct {
	Method string
	// Pattern is the chi pattern, cleaned as chi's RoutePattern cleans it
	// (no trailing slash); a trailing "/*" is a wildcard (contents paths).
	Pattern string
	// Listed is how Sim.Routes lists it.
	Listed string
}

func (r confRoute) key() string { return r.Method + " " + r.Pattern }

// confNormPattern cleans a chi pattern: "/*/" (a mount point) becomes "/",
// and the trailing slash of a subrouter's root route goes.
func confNormPattern(p string) string {
	for strings.Contains(p, "/*/") {
		p = strings.ReplaceAll(p, "/*/", "/")
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// confListedForm is Sim.Routes' rendering of a walked chi route.
func confListedForm(method, route string) string {
	route = strings.Replace(route, "/*", "", -1)
	if len(route) > 1 {
		route = strings.TrimSuffix(route, "/")
	}
	return method + " " + route
}

// confServedRoutes returns the routes s serves: Sim.Routes, with the
// wildcards it drops restored from a walk of the same router.
func confServedRoutes(s *Sim) []confRoute {
	routes, _ := confServedRoutesChecked(s)
	return routes
}

// confServedRoutesChecked also reports where Sim.Routes and the router
// disagree.
func confServedRoutesChecked(s *Sim) ([]confRoute, []string) {
	walked := map[string][]string{} // listed form -> cleaned patterns
	chi.Walk(s.Handler().(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		l := confListedForm(method, route)
		walked[l] = append(walked[l], confNormPattern(route))
		return nil
	})
	var out []confRoute
	var problems []string
	for _, l := range s.Routes() {
		method, pattern, _ := strings.Cut(l, " ")
		ps := walked[l]
		if len(ps) == 0 {
			problems = append(problems, "Sim.Routes lists "+l+", which the router does not serve")
			out = append(out, confRoute{Method: method, Pattern: pattern, Listed: l})
			continue
		}
		out = append(out, confRoute{Method: method, Pattern: ps[0], Listed: l})
		walked[l] = ps[1:]
	}
	for l, ps := range walked {
		for _, p := range ps {
			problems = append(problems, "the router serves "+l+" ("+p+"), which Sim.Routes does not list")
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern+out[i].Method < out[j].Pattern+out[j].Method })
	return out, problems
}

// confSeg is one path segment: a literal, or a parameter.
type confSeg struct {
	lit   string
	param bool
}

func confShape(p string) []confSeg {
	var out []confSeg
	for _, s := range strings.Split(strings.Trim(p, "/"), "/") {
		if s == "" {
			continue
		}
		out = append(out, confSeg{lit: s, param: s == "*" || strings.Contains(s, "{")})
	}
	return out
}

func confSameShape(route, spec []confSeg) bool {
	if len(route) != len(spec) {
		return false
	}
	for i := range route {
		if route[i].param != spec[i].param || (!route[i].param && route[i].lit != spec[i].lit) {
			return false
		}
	}
	return true
}

// confSpec is GitHub's REST description, read once.
type confSpec struct {
	file       string
	version    string
	top        map[string]json.RawMessage
	paths      map[string]map[string]json.RawMessage // path -> method (lower case) or "parameters" -> raw
	components map[string]map[string]json.RawMessage // kind -> name -> raw
	order      []string                              // paths, sorted
	shapes     [][]confSeg                           // their shapes
	webhooks   map[string]string                     // x-webhooks key ("issues-closed") -> payload schema name
}

// webhookSchema names the schema the description documents for a delivery
// of event/action (x-webhooks "sub-issues-sub-issue-added"), or "".
func (s *confSpec) webhookSchema(event, action string) string {
	k := strings.ReplaceAll(event, "_", "-")
	if action != "" {
		k += "-" + strings.ReplaceAll(action, "_", "-")
	}
	return s.webhooks[k]
}

var (
	confSpecOnce sync.Once
	confSpecVal  *confSpec
	confSpecErr  error
)

// confLoadSpec reads api.github.com.json (once per process).
func confLoadSpec() (*confSpec, error) {
	confSpecOnce.Do(func() {
		p, err := corpus.OpenAPIPath()
		if err != nil {
			confSpecErr = err
			return
		}
		b, err := os.ReadFile(p)
		if err != nil {
			confSpecErr = err
			return
		}
		var raw struct {
			OpenAPI    json.RawMessage          `json:"openapi"`
			InfoRaw    json.RawMessage          `json:"info"`
			Servers    json.RawMessage          `json:"servers"`
			Info       struct{ Version string } `json:"-"`
			Paths      map[string]map[string]json.RawMessage
			Components map[string]map[string]json.RawMessage
			Webhooks   map[string]struct {
				Post struct {
					RequestBody struct {
						Content map[string]struct {
							Schema struct {
								Ref string `json:"$ref"`
							} `json:"schema"`
						} `json:"content"`
					} `json:"requestBody"`
				} `json:"post"`
			} `json:"x-webhooks"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			confSpecErr = fmt.Errorf("parse %s: %w", p, err)
			return
		}
		if err := json.Unmarshal(raw.InfoRaw, &raw.Info); err != nil {
			confSpecErr = fmt.Errorf("parse %s: info: %w", p, err)
			return
		}
		top := map[string]json.RawMessage{"openapi": raw.OpenAPI, "info": raw.InfoRaw, "servers": raw.Servers}
		s := &confSpec{file: p, version: raw.Info.Version, top: top, paths: raw.Paths, components: raw.Components,
			webhooks: map[string]string{}}
		for k, w := range raw.Webhooks {
			if ref := w.Post.RequestBody.Content["application/json"].Schema.Ref; ref != "" {
				s.webhooks[k] = strings.TrimPrefix(ref, "#/components/schemas/")
			}
		}
		for k := range raw.Paths {
			s.order = append(s.order, k)
		}
		sort.Strings(s.order)
		for _, p := range s.order {
			s.shapes = append(s.shapes, confShape(p))
		}
		confSpecVal = s
	})
	return confSpecVal, confSpecErr
}

// lookup finds the description's path for a route: the paths of the same
// shape that have the method (normally one), and those of the same shape
// that lack it (for the error message).
func (s *confSpec) lookup(method, pattern string) (withMethod, without []string) {
	rs := confShape(pattern)
	m := strings.ToLower(method)
	for i, p := range s.order {
		if !confSameShape(rs, s.shapes[i]) {
			continue
		}
		if _, ok := s.paths[p][m]; ok {
			withMethod = append(withMethod, p)
		} else {
			without = append(without, p)
		}
	}
	return withMethod, without
}

func (s *confSpec) methodsOf(path string) []string {
	var ms []string
	for k := range s.paths[path] {
		switch k {
		case "get", "put", "post", "delete", "options", "head", "patch", "trace":
			ms = append(ms, strings.ToUpper(k))
		}
	}
	sort.Strings(ms)
	return ms
}

var confRefRE = regexp.MustCompile(`"\$ref"\s*:\s*"#/components/([A-Za-z]+)/([^"]+)"`)

// kinDoc builds a kin-openapi document holding the given paths and every
// component they reference, with additional properties allowed everywhere
// (GitHub adds fields to its answers without notice).
//
// schemas names more component schemas to keep (the webhook payloads of
// x-webhooks).
func (s *confSpec) kinDoc(paths, schemas []string) (*openapi3.T, []string, error) {
	keepPaths := map[string]map[string]json.RawMessage{}
	keep := map[string]map[string]json.RawMessage{}
	var queue []json.RawMessage
	for _, p := range paths {
		keepPaths[p] = s.paths[p]
		for _, raw := range s.paths[p] {
			queue = append(queue, raw)
		}
	}
	for _, name := range schemas {
		raw, ok := s.components["schemas"][name]
		if !ok {
			return nil, nil, fmt.Errorf("no schema %s", name)
		}
		if keep["schemas"] == nil {
			keep["schemas"] = map[string]json.RawMessage{}
		}
		keep["schemas"][name] = raw
		queue = append(queue, raw)
	}
	for len(queue) > 0 {
		raw := queue[0]
		queue = queue[1:]
		for _, m := range confRefRE.FindAllSubmatch(raw, -1) {
			kind, name := string(m[1]), string(m[2])
			if keep[kind] == nil {
				keep[kind] = map[string]json.RawMessage{}
			}
			if _, ok := keep[kind][name]; ok {
				continue
			}
			c, ok := s.components[kind][name]
			if !ok {
				return nil, nil, fmt.Errorf("dangling reference #/components/%s/%s", kind, name)
			}
			keep[kind][name] = c
			queue = append(queue, c)
		}
	}
	doc := map[string]any{"openapi": s.top["openapi"], "info": s.top["info"], "servers": s.top["servers"],
		"paths": keepPaths, "components": keep}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(b)
	if err != nil {
		return nil, nil, fmt.Errorf("kin-openapi: %w", err)
	}
	notes := confPatchDescription(t)
	seen := map[*openapi3.Schema]bool{}
	if t.Components != nil {
		for _, sr := range t.Components.Schemas {
			confRelax(sr, seen)
		}
		for _, rr := range t.Components.Responses {
			confRelaxResponse(rr, seen)
		}
	}
	for _, item := range t.Paths.Map() {
		for _, op := range item.Operations() {
			for _, rr := range op.Responses.Map() {
				confRelaxResponse(rr, seen)
			}
		}
	}
	return t, notes, nil
}

// confPatchDescription mends known defects of the description, where GitHub
// itself would fail it, and says what it mended.
func confPatchDescription(t *openapi3.T) []string {
	var notes []string
	// GET /app/installations: the description inlines the installation's
	// account as allOf [Simple User, Enterprise], which no account satisfies
	// (an organization has no enterprise slug); the installation schema that
	// GET /app/installations/{installation_id} uses says anyOf.
	if item := t.Paths.Value("/app/installations"); item != nil && item.Get != nil {
		if rr := item.Get.Responses.Status(200); rr != nil && rr.Value != nil {
			if mt := rr.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil && mt.Schema.Value != nil &&
				mt.Schema.Value.Items != nil && mt.Schema.Value.Items.Value != nil {
				if acct := mt.Schema.Value.Items.Value.Properties["account"]; acct != nil && acct.Value != nil && len(acct.Value.AllOf) == 2 &&
					acct.Value.AllOf[0].Value != nil && acct.Value.AllOf[0].Value.Title == "Simple User" &&
					acct.Value.AllOf[1].Value != nil && acct.Value.AllOf[1].Value.Title == "Enterprise" {
					acct.Value.AnyOf, acct.Value.AllOf = acct.Value.AllOf, nil
					notes = append(notes, "GET /app/installations 200: items.account allOf [Simple User, Enterprise] read as anyOf, as the installation schema has it")
				}
			}
		}
	}
	return notes
}

func confRelaxResponse(rr *openapi3.ResponseRef, seen map[*openapi3.Schema]bool) {
	if rr == nil || rr.Value == nil {
		return
	}
	for _, mt := range rr.Value.Content {
		if mt != nil {
			confRelax(mt.Schema, seen)
		}
	}
	for _, h := range rr.Value.Headers {
		if h != nil && h.Value != nil {
			confRelax(h.Value.Schema, seen)
		}
	}
}

// confRelax allows additional properties in a schema and all it contains;
// required properties, types, enums and nullability stay checked.
func confRelax(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	// An object schema without properties that forbids any (empty-object,
	// one branch of the oneOf GitHub uses for a commit's author) keeps its
	// constraint: it says "{}", not "these fields at least".
	if h := s.AdditionalProperties.Has; h != nil && !*h && len(s.Properties) > 0 {
		s.AdditionalProperties.Has = nil
	}
	for _, p := range s.Properties {
		confRelax(p, seen)
	}
	confRelax(s.Items, seen)
	confRelax(s.Not, seen)
	confRelax(s.AdditionalProperties.Schema, seen)
	for _, l := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, x := range l {
			confRelax(x, seen)
		}
	}
}

// TestConformanceRoutesInOpenAPI: every route the simulator serves is an
// operation of GitHub's REST description, with that method.
func TestConformanceRoutesInOpenAPI(t *testing.T) {
	spec, err := confLoadSpec()
	confSkipIfMissing(t, err)
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	routes, problems := confServedRoutesChecked(s)
	for _, p := range problems {
		t.Error(p)
	}
	matched := 0
	for _, r := range routes {
		with, without := spec.lookup(r.Method, r.Pattern)
		switch {
		case len(with) == 1:
			matched++
			t.Logf("%-70s = %s %s", r.key(), r.Method, with[0])
		case len(with) > 1:
			matched++
			t.Logf("%-70s = %s %s (also shaped like %s)", r.key(), r.Method, with[0], strings.Join(with[1:], ", "))
		case len(without) > 0:
			var alt []string
			for _, p := range without {
				alt = append(alt, p+" "+strings.Join(spec.methodsOf(p), ","))
			}
			t.Errorf("route %s (listed as %s) is not in GitHub's REST description: no %s operation on %s", r.key(), r.Listed, r.Method, strings.Join(alt, "; "))
		default:
			t.Errorf("route %s (listed as %s) is not in GitHub's REST description: no path of that shape", r.key(), r.Listed)
		}
	}
	t.Logf("routes served: %d; in GitHub's REST description (%s, @octokit/openapi %s): %d", len(routes), "api.github.com.json", spec.version, matched)
}

// confOp is one operation of the description that a served route maps to.
type confOp struct {
	route   confRoute
	path    string // the description's path template
	id      string // operationId
	item    *openapi3.PathItem
	op      *openapi3.Operation
	answers int // exchanges recorded
	ok2xx   int // 2xx answers recorded
	checked int // distinct answers validated
	errs    int // distinct 4xx/5xx answers validated
	undoc   map[int]int
}

func (o *confOp) name() string {
	n := o.route.Method + " " + o.path + " (" + o.id + ")"
	if confShapeString(o.route.Pattern) != confShapeString(o.path) || strings.HasSuffix(o.route.Pattern, "/*") {
		n += " as " + o.route.Pattern
	}
	return n
}

// confShapeString renders a path with its parameters blanked.
func confShapeString(p string) string {
	var b strings.Builder
	for _, s := range confShape(p) {
		b.WriteString("/")
		if s.param {
			b.WriteString("{}")
		} else {
			b.WriteString(s.lit)
		}
	}
	return b.String()
}

// confFailure is one distinct validation failure.
type confFailure struct {
	op      string
	status  int
	message string
	count   int
	path    string // an example request path
}

// confValidateExchanges validates every recorded answer of a served route
// against the description, prints the summary and reports whether the
// package must fail: a response that does not validate, or (when strict)
// a served route that no test answered with a 2xx.
func confValidateExchanges(w io.Writer, spec *confSpec, routes []confRoute, exchanges []confExchange, strict bool) (failed bool) {
	ops := map[string]*confOp{} // by route key
	var notInSpec []string
	pathSet := map[string]bool{}
	for _, r := range routes {
		with, _ := spec.lookup(r.Method, r.Pattern)
		if len(with) == 0 {
			notInSpec = append(notInSpec, r.key())
			continue
		}
		ops[r.key()] = &confOp{route: r, path: with[0], undoc: map[int]int{}}
		pathSet[with[0]] = true
	}
	var paths []string
	for p := range pathSet {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	doc, notes, err := spec.kinDoc(paths, nil)
	if err != nil {
		fmt.Fprintf(w, "FAIL: load the REST description's operations into kin-openapi: %v\n", err)
		return true
	}
	for _, o := range ops {
		o.item = doc.Paths.Value(o.path)
		if o.item != nil {
			o.op = o.item.GetOperation(o.route.Method)
		}
		if o.op == nil {
			fmt.Fprintf(w, "FAIL: %s %s vanished from the loaded description\n", o.route.Method, o.path)
			return true
		}
		o.id = o.op.OperationID
	}

	failures := map[string]*confFailure{}
	seen := map[[32]byte]bool{}
	unrouted, total, validated := 0, 0, 0
	ctx := context.Background()
	for _, e := range exchanges {
		total++
		o := ops[e.Method+" "+confNormPattern(e.Pattern)]
		if o == nil {
			unrouted++ // not found, method not allowed, or a route not in the description
			continue
		}
		o.answers++
		if e.Status >= 200 && e.Status < 300 {
			o.ok2xx++
		}
		if e.Status < 200 || e.Status == http.StatusNotModified || (e.Status >= 300 && e.Status < 400) {
			continue
		}
		is2xx := e.Status < 300
		if !is2xx && o.op.Responses.Status(e.Status) == nil {
			o.undoc[e.Status]++ // an error status the description does not document: nothing to check
			continue
		}
		h := sha256.New()
		fmt.Fprintf(h, "%s\x00%d\x00%s\x00", o.route.key(), e.Status, e.Header.Get("Content-Type"))
		h.Write(e.Body)
		var sum [32]byte
		copy(sum[:], h.Sum(nil))
		if seen[sum] {
			continue
		}
		seen[sum] = true
		validated++
		if is2xx {
			o.checked++
		} else {
			o.errs++
		}
		req := &http.Request{Method: e.Method, URL: &url.URL{Scheme: "https", Host: "api.github.com", Path: e.Path}, Header: http.Header{}}
		in := &openapi3filter.RequestValidationInput{
			Request: req,
			Route:   &routers.Route{Spec: doc, Server: doc.Servers[0], Path: o.path, PathItem: o.item, Method: e.Method, Operation: o.op},
		}
		opts := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}
		in.Options = opts
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: e.Status, Header: e.Header, Options: opts}
		out.SetBodyBytes(e.Body)
		if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
			for _, msg := range confFlatten(err) {
				k := o.name() + "\x00" + fmt.Sprint(e.Status) + "\x00" + msg
				f := failures[k]
				if f == nil {
					f = &confFailure{op: o.name(), status: e.Status, message: msg, path: e.Path}
					failures[k] = f
				}
				f.count++
			}
		}
	}

	// The summary.
	keys := make([]string, 0, len(ops))
	for k := range ops {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	exercised := 0
	var never, no2xx []string
	fmt.Fprintf(w, "--- REST: %d routes served, %d in GitHub's REST description (@octokit/openapi %s)\n", len(routes), len(ops), spec.version)
	for _, n := range notInSpec {
		fmt.Fprintf(w, "    not in the description (see TestConformanceRoutesInOpenAPI): %s\n", n)
	}
	for _, n := range notes {
		fmt.Fprintf(w, "    note: a defect of the description mended: %s\n", n)
	}
	for _, k := range keys {
		o := ops[k]
		if o.answers > 0 {
			exercised++
		}
		var undoc []string
		for st, n := range o.undoc {
			undoc = append(undoc, fmt.Sprintf("%d×%d", n, st))
		}
		sort.Strings(undoc)
		extra := ""
		if len(undoc) > 0 {
			extra = "; undocumented error statuses, not checked: " + strings.Join(undoc, ", ")
		}
		fmt.Fprintf(w, "    %-62s answers %4d, 2xx %4d, distinct 2xx validated %3d, errors validated %2d%s\n",
			o.name(), o.answers, o.ok2xx, o.checked, o.errs, extra)
		switch {
		case o.answers == 0:
			never = append(never, o.route.key())
		case o.ok2xx == 0:
			no2xx = append(no2xx, o.route.key())
		}
	}
	for _, n := range notInSpec {
		never = append(never, n+" (not in the description)")
	}
	fmt.Fprintf(w, "    exchanges recorded %d (%d not on a served route: 404s and the like), operations exercised %d of %d, distinct responses validated %d, failing %d (distinct failures %d)\n",
		total, unrouted, exercised, len(ops), validated, confFailingResponses(failures), len(failures))
	if len(failures) > 0 {
		failed = true
		list := make([]*confFailure, 0, len(failures))
		for _, f := range failures {
			list = append(list, f)
		}
		sort.Slice(list, func(i, j int) bool {
			if list[i].op != list[j].op {
				return list[i].op < list[j].op
			}
			if list[i].status != list[j].status {
				return list[i].status < list[j].status
			}
			return list[i].message < list[j].message
		})
		fmt.Fprintln(w, "--- REST responses that do not match GitHub's documented schema:")
		last := ""
		for _, f := range list {
			if f.op != last {
				fmt.Fprintf(w, "    %s\n", f.op)
				last = f.op
			}
			fmt.Fprintf(w, "      %d (%d×, e.g. %s): %s\n", f.status, f.count, f.path, confTrunc(f.message, 240))
		}
	}
	if len(never) > 0 || len(no2xx) > 0 {
		verdict := "reported"
		if strict {
			verdict = "FAIL (CI=true)"
			failed = true
		}
		for _, r := range never {
			fmt.Fprintf(w, "--- %s: route never exercised by any test: %s\n", verdict, r)
		}
		for _, r := range no2xx {
			fmt.Fprintf(w, "--- %s: route never answered with a 2xx, so its schema was not checked: %s\n", verdict, r)
		}
	}
	return failed
}

func confFailingResponses(fs map[string]*confFailure) int {
	// Failures are per message; this counts (operation, status) pairs.
	set := map[string]bool{}
	for _, f := range fs {
		set[f.op+fmt.Sprint(f.status)] = true
	}
	return len(set)
}

// confFlatten turns a kin-openapi validation error into one line per
// problem: the JSON pointer (array indices as *) and the reason. The
// branches of an allOf are listed instead of the allOf; those of a failed
// oneOf follow it, marked ↳.
func confFlatten(err error) []string {
	var out []string
	var walk func(prefix string, err error, depth int)
	walk = func(prefix string, err error, depth int) {
		if err == nil || depth > 12 {
			return
		}
		switch e := err.(type) {
		case *openapi3filter.ResponseError:
			p := prefix
			if strings.HasPrefix(e.Reason, "response header") {
				p += e.Reason + ": "
			}
			if e.Err == nil {
				out = append(out, prefix+e.Reason)
				return
			}
			walk(p, e.Err, depth+1)
		case openapi3.MultiError:
			for _, x := range e {
				walk(prefix, x, depth+1)
			}
		case *openapi3.SchemaError:
			switch e.SchemaField {
			case "allOf":
				walk(prefix, e.Origin, depth+1)
				return
			case "oneOf":
				out = append(out, prefix+confPointer(e)+": "+e.Reason)
				if !errors.Is(e.Origin, openapi3.ErrOneOfConflict) {
					walk(prefix+"  ↳ ", e.Origin, depth+1)
				}
				return
			}
			field := ""
			if e.SchemaField != "" && e.SchemaField != "required" {
				field = " [" + e.SchemaField + "]"
			}
			out = append(out, prefix+confPointer(e)+": "+e.Reason+field)
		default:
			if u := errors.Unwrap(err); u != nil {
				walk(prefix, u, depth+1)
				return
			}
			out = append(out, prefix+err.Error())
		}
	}
	walk("", err, 0)
	return confDedupe(out)
}

func confPointer(e *openapi3.SchemaError) string {
	ptr := e.JSONPointer()
	for i, s := range ptr {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			ptr[i] = "*"
		}
	}
	return "/" + strings.Join(ptr, "/")
}

func confDedupe(lines []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, l := range lines {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// TestConformanceValidatorCatches holds the harness itself honest: path
// shapes, and a response that breaks the description must fail validation.
func TestConformanceValidatorCatches(t *testing.T) {
	for _, c := range []struct {
		route, spec string
		same        bool
	}{
		{"/repos/{owner}/{repo}/contents/*", "/repos/{owner}/{repo}/contents/{path}", true},
		{"/repos/{owner}/{repo}/issues/{number}", "/repos/{owner}/{repo}/issues/{issue_number}", true},
		{"/repos/{owner}/{repo}/issues/comments", "/repos/{owner}/{repo}/issues/{issue_number}", false},
		{"/repos/{owner}/{repo}/issues/{number}", "/repos/{owner}/{repo}/issues/comments", false},
		{"/repos/{owner}/{repo}/compare/{base}...{head}", "/repos/{owner}/{repo}/compare/{basehead}", true},
		{"/repos/{owner}/{repo}", "/repos/{owner}/{repo}/installation", false},
	} {
		if got := confSameShape(confShape(c.route), confShape(c.spec)); got != c.same {
			t.Errorf("confSameShape(%s, %s) = %v", c.route, c.spec, got)
		}
	}
	for in, want := range map[string]string{
		"/repos/{owner}/{repo}/":                "/repos/{owner}/{repo}",
		"/repos/{owner}/{repo}/*/commits/{ref}": "/repos/{owner}/{repo}/commits/{ref}",
		"/repos/{owner}/{repo}/*/contents/*":    "/repos/{owner}/{repo}/contents/*",
		"/":                                     "/",
	} {
		if got := confNormPattern(in); got != want {
			t.Errorf("confNormPattern(%s) = %s, want %s", in, got, want)
		}
	}

	spec, err := confLoadSpec()
	confSkipIfMissing(t, err)
	routes := []confRoute{{Method: "GET", Pattern: "/rate_limit", Listed: "GET /rate_limit"}}
	hdr := http.Header{"Content-Type": {"application/json; charset=utf-8"}}
	bad := `{"resources":{"core":{"limit":"5000","remaining":1,"reset":1,"used":1}},"rate":{"limit":5000,"remaining":1,"reset":1,"used":1}}`
	var buf strings.Builder
	ex := []confExchange{{Exchange: Exchange{Method: "GET", Pattern: "/rate_limit", Path: "/rate_limit", Status: 200, Header: hdr, Body: []byte(bad)}}}
	if !confValidateExchanges(&buf, spec, routes, ex, false) {
		t.Fatalf("a response breaking the description passed:\n%s", buf.String())
	}
	for _, want := range []string{`/resources/search: property "search" is missing`, `/resources/core/limit: value must be an integer`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, buf.String())
		}
	}
	// An unexercised route is reported, and fails only when strict.
	buf.Reset()
	if confValidateExchanges(&buf, spec, routes, nil, false) || !strings.Contains(buf.String(), "never exercised") {
		t.Errorf("unexercised route, not strict:\n%s", buf.String())
	}
	if !confValidateExchanges(io.Discard, spec, routes, nil, true) {
		t.Error("unexercised route, strict: passed")
	}
}
