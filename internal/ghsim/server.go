package ghsim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
)

// docs is the documentation_url GitHub puts in error bodies.
const docs = "https://docs.github.com/rest"

func (s *Sim) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.observe)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound, "Not Found") })
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) { writeError(w, http.StatusNotFound, "Not Found") })
	s.manifestRoutes(r) // the manifest conversion: no authentication, as on GitHub
	// The App, authenticated with its JWT.
	r.Group(func(r chi.Router) {
		r.Use(s.requireJWT)
		s.appRoutes(r)
	})
	// Everything else, with an installation token scoped to its repositories.
	r.Group(func(r chi.Router) {
		r.Use(s.requireToken)
		r.Get("/rate_limit", s.getRateLimit)
		r.Get("/installation/repositories", s.listInstallationRepos)
		r.Route("/repos/{owner}/{repo}", func(r chi.Router) {
			r.Use(s.requireRepo)
			r.Get("/", s.getRepo)
			s.issueRoutes(r)
			s.gitRoutes(r)
		})
	})
	return r
}

// Routes lists the routes the simulator serves as METHOD PATTERN pairs
// (chi patterns, e.g. "GET /repos/{owner}/{repo}/issues/{number}").
func (s *Sim) Routes() []string {
	var out []string
	chi.Walk(s.mux.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.Replace(route, "/*", "", -1)
		if len(route) > 1 {
			route = strings.TrimSuffix(route, "/")
		}
		out = append(out, method+" "+route)
		return nil
	})
	return out
}

// errorBody is GitHub's error shape.
type errorBody struct {
	Message          string           `json:"message"`
	Errors           []map[string]any `json:"errors,omitempty"`
	DocumentationURL string           `json:"documentation_url"`
	Status           string           `json:"status"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorBody{Message: msg, DocumentationURL: docs, Status: strconv.Itoa(code)})
}

// writeValidation answers 422 Validation Failed with GitHub's errors list.
func writeValidation(w http.ResponseWriter, resource, field, code, message string) {
	e := map[string]any{"resource": resource, "field": field, "code": code}
	if message != "" {
		e["message"] = message
	}
	writeJSON(w, http.StatusUnprocessableEntity, errorBody{Message: "Validation Failed", Errors: []map[string]any{e},
		DocumentationURL: docs, Status: "422"})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	w.Write(b)
}

// readJSON decodes a request body (at most 1 MiB), answering 400 "Problems
// parsing JSON" as GitHub does when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// pathParam returns a URL parameter, path-unescaped (label names arrive
// escaped: "needs%2Ftriage").
func pathParam(r *http.Request, name string) string {
	v := chi.URLParam(r, name)
	if u, err := url.PathUnescape(v); err == nil {
		return u
	}
	return v
}

// intParam parses a numeric URL parameter.
func intParam(r *http.Request, name string) (int64, bool) {
	n, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	return n, err == nil && n > 0
}

// page reads per_page (default 30, at most 100) and page (from 1).
func page(r *http.Request) (perPage, pg int) {
	perPage, pg = 30, 1
	if v, err := strconv.Atoi(r.URL.Query().Get("per_page")); err == nil && v > 0 {
		perPage = min(v, 100)
	}
	if v, err := strconv.Atoi(r.URL.Query().Get("page")); err == nil && v > 0 {
		pg = v
	}
	return perPage, pg
}

// paginate returns the slice bounds of the requested page of n items and
// sets GitHub's Link header (next, last, first, prev).
func paginate(w http.ResponseWriter, r *http.Request, n int) (lo, hi int) {
	per, pg := page(r)
	last := max(1, (n+per-1)/per)
	lo, hi = min((pg-1)*per, n), min(pg*per, n)
	link := func(p int, rel string) string {
		u := *r.URL
		u.Scheme, u.Host = "http", r.Host
		if fwd := r.Header.Get("X-Forwarded-Proto"); fwd != "" {
			u.Scheme = fwd
		}
		q := u.Query()
		q.Set("page", strconv.Itoa(p))
		q.Set("per_page", strconv.Itoa(per))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if pg < last {
		links = append(links, link(pg+1, "next"), link(last, "last"))
	}
	if pg > 1 {
		links = append(links, link(1, "first"), link(pg-1, "prev"))
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return lo, hi
}

// recorder buffers a response so the observer can add ETags and rate-limit
// headers, or turn it into a 304.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(c int) {
	if r.code == 0 {
		r.code = c
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = http.StatusOK
	}
	return r.body.Write(b)
}

// observe is the outermost middleware: latency and injected faults,
// rate-limit accounting and headers, call counts and conditional requests.
func (s *Sim) observe(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d := s.latency(); d > 0 {
			time.Sleep(d)
		}
		c := s.identify(r)
		if f, ok := s.takeFault(r); ok && f.hang > 0 {
			// The body is read first, so that the server notices a client
			// that gives up (it watches the connection once the body is
			// consumed) and the held request is then dropped.
			if r.Body != nil {
				b, _ := io.ReadAll(io.LimitReader(r.Body, 2<<20))
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			t := time.NewTimer(f.hang)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return // the client gave up: nothing is done
			}
		} else if ok {
			if f.secondary {
				w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
				writeJSON(w, f.code, errorBody{Message: "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID " + requestID() + ".",
					DocumentationURL: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits", Status: strconv.Itoa(f.code)})
			} else {
				writeError(w, f.code, http.StatusText(f.code))
			}
			return
		}
		free := r.URL.Path == "/rate_limit"
		if !free && c.known {
			if rs, exhausted := s.rateExhausted(c.installation); exhausted {
				s.setRateHeaders(w.Header(), rs)
				writeJSON(w, http.StatusForbidden, errorBody{
					Message:          fmt.Sprintf("API rate limit exceeded for installation ID %d. If you reach out to GitHub Support for help, please include the request ID %s.", c.installation, requestID()),
					DocumentationURL: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-rate-limits", Status: "403"})
				return
			}
		}
		var reqBody []byte
		if r.Body != nil && r.Method != http.MethodGet {
			reqBody, _ = io.ReadAll(io.LimitReader(r.Body, 2<<20))
			r.Body = io.NopCloser(bytes.NewReader(reqBody))
		}
		rec := &recorder{header: http.Header{}}
		next.ServeHTTP(rec, r)
		defer func() {
			s.mu.Lock()
			f := s.onExchange
			s.mu.Unlock()
			if f != nil {
				pattern := ""
				if rc := chi.RouteContext(r.Context()); rc != nil {
					pattern = rc.RoutePattern()
				}
				f(Exchange{Method: r.Method, Pattern: pattern, Path: r.URL.Path, Status: rec.code,
					Header: rec.header.Clone(), Body: append([]byte(nil), rec.body.Bytes()...), Request: reqBody})
			}
		}()
		if rec.code == 0 {
			rec.code = http.StatusOK
		}
		h := w.Header()
		for k, v := range rec.header {
			h[k] = v
		}
		h.Set("X-GitHub-Request-Id", requestID())
		h.Set("X-GitHub-Api-Version-Selected", "2022-11-28")
		notModified := false
		if r.Method == http.MethodGet && rec.code == http.StatusOK {
			// ETags are specific to the credential, as on GitHub: a new token
			// gets 200 for an old ETag.
			sum := sha256.Sum256(append([]byte(c.credential+"\x00"), rec.body.Bytes()...))
			etag := `W/"` + hex.EncodeToString(sum[:16]) + `"`
			h.Set("ETag", etag)
			h.Set("Cache-Control", "private, max-age=60, s-maxage=60")
			h.Set("Vary", "Accept, Authorization, Cookie, X-GitHub-OTP")
			for _, m := range strings.Split(r.Header.Get("If-None-Match"), ",") {
				if strings.TrimSpace(m) == etag {
					notModified = true
				}
			}
		}
		if c.known {
			rs := s.charge(c.installation, r.Method, notModified || free)
			s.setRateHeaders(h, rs)
		}
		if notModified {
			h.Del("Content-Type")
			h.Del("Content-Length")
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.WriteHeader(rec.code)
		w.Write(rec.body.Bytes())
	})
}

var reqSeq atomic.Int64

func requestID() string {
	n := reqSeq.Add(1)
	return fmt.Sprintf("C0DE:%04X:%06X:%06X:%08X", n%0xffff, n, n*7, time.Now().Unix())
}
