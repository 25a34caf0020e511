package ghsim

import (
	"encoding/base64"
	"net/http"
	"sort"
	"strings"
)

// getContents answers GET /contents/{path}?ref=: a file (base64, wrapped at
// 60 columns as GitHub does), or a directory's listing.
func (s *Sim) getContents(w http.ResponseWriter, r *http.Request) {
	p := wildcard(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	if !needPermission(w, repo, "contents", "read") {
		return
	}
	ref := r.URL.Query().Get("ref")
	if ref == "" {
		ref = repo.DefaultBranch
	}
	c := resolveLocked(repo, ref)
	if c == nil {
		writeError(w, http.StatusNotFound, "No commit found for the ref "+ref)
		return
	}
	if content, ok := c.Files[p]; ok && p != "" {
		m := s.contentJSON(repo, ref, p, "file", gitBlobSHA(content), len(content))
		if len(content) > 1<<20 {
			m["content"], m["encoding"] = "", "none"
		} else {
			m["content"], m["encoding"] = wrapBase64(content), "base64"
		}
		writeJSON(w, http.StatusOK, m)
		return
	}
	entries := dirEntries(c.Files, p)
	if entries == nil {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	out := []any{}
	for _, e := range entries {
		out = append(out, s.contentJSON(repo, ref, e.path, e.typ, e.sha, e.size))
	}
	writeJSON(w, http.StatusOK, out)
}

func wrapBase64(content string) string {
	enc := base64.StdEncoding.EncodeToString([]byte(content))
	var sb strings.Builder
	for len(enc) > 60 {
		sb.WriteString(enc[:60] + "\n")
		enc = enc[60:]
	}
	if enc != "" {
		sb.WriteString(enc + "\n")
	}
	return sb.String()
}

type dirEntry struct {
	path, typ, sha string
	size           int
}

// dirEntries lists the directory dir ("" the root) of a snapshot, by name;
// nil when there is no such directory.
func dirEntries(files map[string]string, dir string) []dirEntry {
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	subdirs := map[string]map[string]string{}
	var out []dirEntry
	for p, c := range files {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok {
			continue
		}
		if name, sub, isDir := strings.Cut(rest, "/"); isDir {
			if subdirs[name] == nil {
				subdirs[name] = map[string]string{}
			}
			subdirs[name][sub] = c
			continue
		}
		out = append(out, dirEntry{path: p, typ: "file", sha: gitBlobSHA(c), size: len(c)})
	}
	for name, sub := range subdirs {
		out = append(out, dirEntry{path: prefix + name, typ: "dir", sha: gitTreeSHA(sub)})
	}
	if out == nil {
		return nil
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}
