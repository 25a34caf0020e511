package agentapi

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// MaxBody is the largest request body the API reads.
const MaxBody = 1 << 20

// Field limits.
const (
	maxTitle      = 256
	maxSpec       = 65536 // GitHub's issue body limit, in characters
	maxBody       = 65536
	maxAuthor     = 200
	maxProvenance = 1024
	maxTags       = 100
	maxLinks      = 200
	maxWait       = 60
	maxLimit      = 1000
	defaultLimit  = 100
)

var unknownFieldRe = regexp.MustCompile(`unknown field "([^"]*)"`)

// decode reads a JSON request body into dst: at most MaxBody bytes, one
// value, no unknown fields. A missing body decodes as {} when empty is true.
func decode(w http.ResponseWriter, r *http.Request, dst any, empty bool) *Problem {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return problem(http.StatusUnsupportedMediaType, ReasonUnsupportedMedia, "send the request body as application/json, not %q", ct)
		}
	}
	body := http.MaxBytesReader(w, r.Body, MaxBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	err := dec.Decode(dst)
	if errors.Is(err, io.EOF) {
		if empty {
			return nil
		}
		return problem(http.StatusBadRequest, ReasonInvalidJSON, "the request needs a JSON object body")
	}
	if err == nil {
		// Exactly one value: anything after it but white space is refused.
		if _, err2 := dec.Token(); !errors.Is(err2, io.EOF) {
			if err2 == nil {
				return problem(http.StatusBadRequest, ReasonInvalidJSON, "the body holds more than one JSON value")
			}
			err = err2
		}
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &mbe):
		return problem(http.StatusRequestEntityTooLarge, ReasonTooLarge, "the request body is larger than %d bytes", MaxBody)
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			return problem(http.StatusBadRequest, ReasonInvalidJSON, "the body must be a JSON object, not %s", ute.Value)
		}
		return invalid(field, "%s must be %s, not %s", field, jsonKind(ute.Type.Kind().String()), ute.Value)
	case errors.As(err, &se), errors.Is(err, io.ErrUnexpectedEOF):
		return problem(http.StatusBadRequest, ReasonInvalidJSON, "the body is not valid JSON: %v", err)
	}
	if m := unknownFieldRe.FindStringSubmatch(err.Error()); m != nil {
		return invalid(m[1], "unknown field %q", m[1])
	}
	return problem(http.StatusBadRequest, ReasonInvalidJSON, "the body could not be read: %v", err)
}

func jsonKind(k string) string {
	switch k {
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64", "float32":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "ptr":
		return "a value of the documented type"
	}
	return "of another type"
}

// checkText checks a free-text field's length in characters.
func checkText(field, v string, min, max int) *Problem {
	if !utf8.ValidString(v) {
		return invalid(field, "%s is not valid UTF-8", field)
	}
	n := utf8.RuneCountInString(v)
	if n < min || (min > 0 && strings.TrimSpace(v) == "") {
		return invalid(field, "%s must not be empty", field)
	}
	if n > max {
		return invalid(field, "%s is %d characters; at most %d", field, n, max)
	}
	return nil
}

func checkTags(field string, tags []string) *Problem {
	if len(tags) > maxTags {
		return invalid(field, "%s has %d tags; at most %d", field, len(tags), maxTags)
	}
	for i, t := range tags {
		if err := gating.ValidTagSyntax(t); err != nil {
			return invalid(fmt.Sprintf("%s[%d]", field, i), "%v", err)
		}
	}
	return nil
}

// linkIn is a link as a request gives it.
type linkIn struct {
	Rel    string `json:"rel"`
	Target string `json:"target"`
}

// keyRe matches a protocol key: repo/{repoId}/mem/backlog/issue-N.
var keyRe = regexp.MustCompile(`^repo/([^/]+)/mem/backlog/(issue-[0-9]+)$`)

// normalizeLinks checks links and turns protocol keys into item ids. A key
// must name this repository: its repoId is the repository's numeric id or a
// name Options.RepoKeys maps to it.
func (h *handler) normalizeLinks(field string, repo store.Repo, in []linkIn) ([]gating.Link, *Problem) {
	if len(in) > maxLinks {
		return nil, invalid(field, "%s has %d links; at most %d", field, len(in), maxLinks)
	}
	out := make([]gating.Link, 0, len(in))
	for i, l := range in {
		f := fmt.Sprintf("%s[%d]", field, i)
		rel := gating.Rel(l.Rel)
		if !gating.ValidRel(rel) {
			return nil, invalid(f+".rel", "%q is not a relation (blockedBy, anchoredTo, partOf, integrates, informs, related, claims)", l.Rel)
		}
		t := l.Target
		switch rel {
		case gating.AnchoredTo:
			if !gating.ValidAnchor(t) {
				return nil, invalid(f+".target", "anchoredTo %q is not a repository-relative file path", t)
			}
		case gating.Claims:
			if field != "removeLinks" {
				// The protocol keeps claims on a per-run worker record: on a
				// long-lived item its dots grow without bound, and exclusion
				// comes from the fenced claim, not from an edge.
				p := problem(http.StatusUnprocessableEntity, gating.CodeClaimsOnItem,
					"%s: a claims link is refused on an item: claims belongs on a short-lived per-run worker record (this run asserts ownership of the item), never on the item; take the item with POST /items/{id}/claim, whose fenced claim is the exclusion", f)
				p.Field = f + ".rel"
				return nil, p
			}
			if t == "" || len(t) > 300 {
				return nil, invalid(f+".target", "a claims link target must be 1 to 300 characters")
			}
		default:
			if m := keyRe.FindStringSubmatch(t); m != nil {
				if !h.keyNamesRepo(m[1], repo) {
					return nil, invalid(f+".target", "%q names repository %q, not %s (links stay within one repository)", t, m[1], repo.FullName)
				}
				t = m[2]
			}
			if _, err := gating.ParseID(t); err != nil {
				return nil, invalid(f+".target", "%s target %q is neither an item id (issue-N) nor a protocol key (repo/{repoId}/mem/backlog/issue-N)", rel, l.Target)
			}
		}
		out = append(out, gating.Link{Rel: rel, Target: t})
	}
	return out, nil
}

func (h *handler) keyNamesRepo(repoID string, repo store.Repo) bool {
	if repoID == strconv.FormatInt(repo.ID, 10) {
		return true
	}
	full, ok := h.opt.RepoKeys[repoID]
	return ok && strings.EqualFold(full, repo.FullName)
}

// itemID reads the {id} path parameter.
func itemID(s string) (gating.ItemID, *Problem) {
	if _, err := gating.ParseID(s); err != nil {
		return "", invalid("id", "%v", err)
	}
	return gating.ItemID(s), nil
}

// Cursors are opaque to clients: base64url of "v1:<last issue number>".
func encodeCursor(n int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + strconv.Itoa(n)))
}

func decodeCursor(s string) (int, *Problem) {
	if s == "" {
		return 0, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		if v, ok := strings.CutPrefix(string(b), "v1:"); ok {
			if n, err := strconv.Atoi(v); err == nil && n >= 0 {
				return n, nil
			}
		}
	}
	return 0, invalid("cursor", "cursor %q is not one this API handed out (pass nextCursor back unchanged)", s)
}

func parseLimit(s string) (int, *Problem) {
	if s == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		return 0, invalid("limit", "limit must be an integer from 1 to %d", maxLimit)
	}
	return n, nil
}

// ownerRe: an owner is a marker field value: ASCII, no spaces.
var ownerRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/@:+-]{0,199}$`)

// branchRe: a plausible git branch name (GitHub refuses the rest anyway).
var branchRe = regexp.MustCompile(`^[A-Za-z0-9._][A-Za-z0-9._/+-]{0,254}$`)

func checkBranch(field, b string) *Problem {
	if !branchRe.MatchString(b) || strings.Contains(b, "..") || strings.Contains(b, "//") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") {
		return invalid(field, "%q is not a branch name", b)
	}
	return nil
}

func checkToken(field string, t *int64, required bool) *Problem {
	if t == nil {
		if required {
			return invalid(field, "%s is required (the token your claim returned)", field)
		}
		return nil
	}
	if *t < 1 {
		if required {
			return invalid(field, "%s %d is no fencing token: warden issues them from 1 upwards, one per claim (send the token your claim returned)", field, *t)
		}
		return invalid(field, "%s %d is no fencing token: warden issues them from 1 upwards, one per claim (send the token your claim returned, or leave %s out when writing outside any claim)", field, *t, field)
	}
	return nil
}
