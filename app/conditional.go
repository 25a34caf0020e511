package app

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

const (
	// defaultConditionalCacheBytes bounds the conditional-request cache
	// when Config.ConditionalCacheBytes is 0.
	defaultConditionalCacheBytes int64 = 64 << 20
	// maxConditionalBody is the largest response body the cache stores;
	// larger bodies are passed through unread.
	maxConditionalBody int64 = 8 << 20
	// entryOverhead approximates an entry's fixed cost (structs, list
	// element, map slot) in the byte accounting.
	entryOverhead = 256
)

// ConditionalStats describe the access layer's conditional-request (ETag /
// Last-Modified) cache, for all installations together.
type ConditionalStats struct {
	// Hits are GETs answered 304 Not Modified by GitHub (free of the
	// primary rate limit) and served to the caller as the cached 200.
	Hits int64
	// Misses are cacheable GETs that were not hits: no entry was cached
	// for them, or the conditional request was answered with something
	// other than 304 (a 200 after the resource or the token changed, an
	// error...).
	Misses int64
	// Evictions are entries dropped to stay within the byte budget.
	Evictions int64
	// Bytes is the memory the entries account for: bodies, headers and keys.
	Bytes int64
	// Entries is the number of cached responses.
	Entries int
}

// ConditionalStats returns the conditional-request cache's counters; all
// zero when the cache is off (Config.ConditionalCacheBytes < 0).
func (a *App) ConditionalStats() ConditionalStats {
	if c, ok := a.layer.conditional.(*etagCache); ok && c != nil {
		return c.stats()
	}
	return ConditionalStats{}
}

// etagKey identifies one cached representation. ETags are specific to the
// credential that fetched them; keying by installation (stable across token
// rotations) lets a rotated token send the old validator, get a 200 and
// refresh the entry.
type etagKey struct {
	installation int64
	method       string
	url          string // full URL, escaped path and query
	accept       string // Accept values: media types are representations
	encoding     string // Accept-Encoding, when the caller set one
	apiVersion   string // X-GitHub-Api-Version
}

// etagEntry is a stored 200 response. It is never modified once stored, so
// a snapshot handed to a request in flight stays valid after eviction.
type etagEntry struct {
	key          etagKey
	path         string // escaped path, for invalidation by writes
	etag         string
	lastModified string
	header       http.Header
	body         []byte
	uncompressed bool
	size         int64
}

// etagCache is the conditionalCache: an LRU by total bytes, safe for
// concurrent use.
type etagCache struct {
	capacity int64
	maxBody  int64

	hitsMetric   prometheus.Counter // nil: no metrics
	missesMetric prometheus.Counter
	bytesMetric  prometheus.Gauge

	mu        sync.Mutex
	order     *list.List // front = most recently used; values are *etagEntry
	items     map[etagKey]*list.Element
	byInst    map[int64]map[etagKey]*list.Element
	bytes     int64
	hits      int64
	misses    int64
	evictions int64
}

// newConditionalCache builds the cache for a Config.ConditionalCacheBytes
// value: 0 means the default, negative means off (nil, nil). Its metrics are
// registered with reg when reg is not nil.
func newConditionalCache(capacity int64, reg prometheus.Registerer) (*etagCache, error) {
	if capacity < 0 {
		return nil, nil
	}
	if capacity == 0 {
		capacity = defaultConditionalCacheBytes
	}
	c := &etagCache{
		capacity: capacity,
		maxBody:  min(maxConditionalBody, capacity),
		order:    list.New(),
		items:    make(map[etagKey]*list.Element),
		byInst:   make(map[int64]map[etagKey]*list.Element),
	}
	if reg != nil {
		var err error
		if c.hitsMetric, err = registerCollector(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warden_github_conditional_hits_total",
			Help: "GitHub GETs answered 304 Not Modified and served from the conditional-request cache.",
		})); err != nil {
			return nil, err
		}
		if c.missesMetric, err = registerCollector(reg, prometheus.NewCounter(prometheus.CounterOpts{
			Name: "warden_github_conditional_misses_total",
			Help: "Cacheable GitHub GETs not served from the conditional-request cache (no entry, or answered other than 304).",
		})); err != nil {
			return nil, err
		}
		if c.bytesMetric, err = registerCollector(reg, prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "warden_github_conditional_cache_bytes",
			Help: "Bytes held by the GitHub conditional-request cache (bodies, headers and keys).",
		})); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// registerCollector registers m, or returns the collector of the same name
// already registered (several Apps may share a Registerer: counters then sum
// over them, and gauges are moved by deltas or set to the latest reading).
// Every metric of the access layer is registered through it.
func registerCollector[M prometheus.Collector](reg prometheus.Registerer, m M) (M, error) {
	if err := reg.Register(m); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(M); ok {
				return existing, nil
			}
		}
		var zero M
		return zero, fmt.Errorf("register GitHub access metrics: %w", err)
	}
	return m, nil
}

// pendingKey marks, in a request's context, a GET the cache prepared.
type pendingKey struct{}

// pending is what prepare found for a request: its key and the entry whose
// validator it sent (nil when none).
type pending struct {
	key   etagKey
	entry *etagEntry
}

func keyFor(installation int64, req *http.Request) etagKey {
	return etagKey{
		installation: installation,
		method:       req.Method,
		url:          req.URL.String(),
		accept:       strings.Join(req.Header.Values("Accept"), ", "),
		encoding:     strings.Join(req.Header.Values("Accept-Encoding"), ", "),
		apiVersion:   req.Header.Get("X-GitHub-Api-Version"),
	}
}

// callerConditional reports whether the caller made the request conditional
// (or partial) itself: the cache then leaves it, and its 304, alone.
func callerConditional(h http.Header) bool {
	for _, k := range []string{"If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "If-Range", "Range"} {
		if h.Get(k) != "" {
			return true
		}
	}
	return hasCacheDirective(h, "no-store")
}

// hasCacheDirective reports whether a Cache-Control header holds directive.
func hasCacheDirective(h http.Header, directive string) bool {
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(strings.TrimSpace(d), "=")
			if strings.EqualFold(name, directive) {
				return true
			}
		}
	}
	return false
}

// prepare implements conditionalCache: on a GET made as an installation, it
// adds the stored validator and marks the request for complete.
func (c *etagCache) prepare(installation int64, req *http.Request) {
	if installation == AppInstallation || req.Method != http.MethodGet || callerConditional(req.Header) {
		return
	}
	p := &pending{key: keyFor(installation, req)}
	c.mu.Lock()
	if el, ok := c.items[p.key]; ok {
		c.order.MoveToFront(el)
		p.entry = el.Value.(*etagEntry)
	}
	c.mu.Unlock()
	if e := p.entry; e != nil {
		if e.etag != "" {
			req.Header.Set("If-None-Match", e.etag)
		} else {
			req.Header.Set("If-Modified-Since", e.lastModified)
		}
	}
	*req = *req.WithContext(context.WithValue(req.Context(), pendingKey{}, p))
}

// complete implements conditionalCache: writes invalidate the installation's
// entries under their path; for a GET prepare marked, a 304 becomes the
// stored 200 and a cacheable 200 is stored.
func (c *etagCache) complete(installation int64, req *http.Request, resp *http.Response) *http.Response {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
	default:
		if installation != AppInstallation {
			c.invalidate(installation, req.URL.EscapedPath())
		}
		return resp
	}
	p, _ := req.Context().Value(pendingKey{}).(*pending)
	if p == nil {
		return resp
	}
	if resp.StatusCode == http.StatusNotModified && p.entry != nil {
		c.count(true)
		return p.entry.response(resp)
	}
	c.count(false)
	if resp.StatusCode == http.StatusOK && cacheable(resp) {
		return c.store(p, req, resp)
	}
	if p.entry != nil && resp.StatusCode < 500 {
		// The stored representation is stale or gone (404, 410, a 200 no
		// longer cacheable): free it.
		c.remove(p.key, p.entry)
	}
	return resp
}

// cacheable reports whether a 200 carries a validator and may be stored.
func cacheable(resp *http.Response) bool {
	h := resp.Header
	return (h.Get("ETag") != "" || h.Get("Last-Modified") != "") && !hasCacheDirective(h, "no-store")
}

// store reads resp's body (up to maxBody), stores it with its validator and
// returns resp with a fresh reader over the same bytes. A larger body, or one
// whose read fails, is handed on as it comes and not stored.
func (c *etagCache) store(p *pending, req *http.Request, resp *http.Response) *http.Response {
	if resp.ContentLength > c.maxBody {
		c.dropStale(p)
		return resp
	}
	var body []byte
	if resp.Body != nil && resp.Body != http.NoBody {
		var err error
		body, err = io.ReadAll(io.LimitReader(resp.Body, c.maxBody+1))
		if err != nil || int64(len(body)) > c.maxBody {
			resp.Body = &replayBody{
				Reader: io.MultiReader(bytes.NewReader(body), &errReader{err: err, rest: resp.Body}),
				closer: resp.Body,
			}
			c.dropStale(p)
			return resp
		}
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}

	e := &etagEntry{
		key:          p.key,
		path:         req.URL.EscapedPath(),
		etag:         resp.Header.Get("ETag"),
		lastModified: resp.Header.Get("Last-Modified"),
		header:       resp.Header.Clone(),
		body:         body,
		uncompressed: resp.Uncompressed,
	}
	e.size = int64(len(body)) + headerSize(e.header) + int64(len(e.key.url)+len(e.key.accept)+
		len(e.key.encoding)+len(e.key.apiVersion)+len(e.path)) + entryOverhead
	if e.size > c.capacity {
		c.dropStale(p)
		return resp
	}
	c.put(e)
	return resp
}

// dropStale removes the entry a request was prepared with, once the answer
// showed it stale but the new representation is not stored.
func (c *etagCache) dropStale(p *pending) {
	if p.entry != nil {
		c.remove(p.key, p.entry)
	}
}

func headerSize(h http.Header) int64 {
	var n int64
	for k, vv := range h {
		for _, v := range vv {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// put stores e, replacing any entry under its key, and evicts the least
// recently used entries beyond the byte budget.
func (c *etagCache) put(e *etagEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.bytes
	if el, ok := c.items[e.key]; ok {
		c.removeLocked(el)
	}
	el := c.order.PushFront(e)
	c.items[e.key] = el
	inst := c.byInst[e.key.installation]
	if inst == nil {
		inst = make(map[etagKey]*list.Element)
		c.byInst[e.key.installation] = inst
	}
	inst[e.key] = el
	c.bytes += e.size
	for c.bytes > c.capacity {
		last := c.order.Back()
		if last == nil || last == el {
			break
		}
		c.removeLocked(last)
		c.evictions++
	}
	c.moveGaugeLocked(before)
}

// remove drops the entry under key if it is still e.
func (c *etagCache) remove(key etagKey, e *etagEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok && el.Value.(*etagEntry) == e {
		before := c.bytes
		c.removeLocked(el)
		c.moveGaugeLocked(before)
	}
}

// invalidate drops an installation's entries whose path is path or lies
// under it (path + "/..."), whatever their query.
func (c *etagCache) invalidate(installation int64, path string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	before := c.bytes
	for _, el := range c.byInst[installation] {
		p := el.Value.(*etagEntry).path
		if p == path || (strings.HasPrefix(p, path) && (strings.HasSuffix(path, "/") || p[len(path)] == '/')) {
			c.removeLocked(el)
		}
	}
	c.moveGaugeLocked(before)
}

func (c *etagCache) removeLocked(el *list.Element) {
	e := el.Value.(*etagEntry)
	c.order.Remove(el)
	delete(c.items, e.key)
	if inst := c.byInst[e.key.installation]; inst != nil {
		delete(inst, e.key)
		if len(inst) == 0 {
			delete(c.byInst, e.key.installation)
		}
	}
	c.bytes -= e.size
}

func (c *etagCache) moveGaugeLocked(before int64) {
	if c.bytesMetric != nil && c.bytes != before {
		c.bytesMetric.Add(float64(c.bytes - before))
	}
}

func (c *etagCache) count(hit bool) {
	c.mu.Lock()
	if hit {
		c.hits++
	} else {
		c.misses++
	}
	c.mu.Unlock()
	switch {
	case hit && c.hitsMetric != nil:
		c.hitsMetric.Inc()
	case !hit && c.missesMetric != nil:
		c.missesMetric.Inc()
	}
}

func (c *etagCache) stats() ConditionalStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return ConditionalStats{Hits: c.hits, Misses: c.misses, Evictions: c.evictions, Bytes: c.bytes, Entries: c.order.Len()}
}

// notModifiedSkip are the 304's headers that describe its (empty) body, not
// the stored representation's.
var notModifiedSkip = map[string]bool{
	"Content-Length":    true,
	"Content-Type":      true,
	"Content-Encoding":  true,
	"Content-Range":     true,
	"Transfer-Encoding": true,
}

// response turns a 304 into the stored 200: the stored headers updated with
// the 304's (fresh x-ratelimit-*, Date, request id...), the stored body
// behind a fresh reader. The 304's body is drained and closed.
func (e *etagEntry) response(notModified *http.Response) *http.Response {
	h := e.header.Clone()
	for k, vv := range notModified.Header {
		if notModifiedSkip[http.CanonicalHeaderKey(k)] {
			continue
		}
		h[k] = append([]string(nil), vv...)
	}
	discard(notModified)
	return &http.Response{
		Status:        "200 OK",
		StatusCode:    http.StatusOK,
		Proto:         notModified.Proto,
		ProtoMajor:    notModified.ProtoMajor,
		ProtoMinor:    notModified.ProtoMinor,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(e.body)),
		ContentLength: int64(len(e.body)),
		Uncompressed:  e.uncompressed,
		Request:       notModified.Request,
		TLS:           notModified.TLS,
	}
}
