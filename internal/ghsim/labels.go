package ghsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
)

// defaultLabelColor is the color of a label created without one (and of
// labels created on the fly by naming them on an issue).
const defaultLabelColor = "ededed"

var hexColor = regexp.MustCompile(`^[0-9a-fA-F]{6}$`)

// labelNameParam reads {name}. chi matches against the escaped path when
// the request has one (a name with "%2F" in it), so the value is unescaped
// then, and taken as is when chi matched the already-decoded path.
func labelNameParam(r *http.Request) string {
	v := chi.URLParam(r, "name")
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}

// lowerTrim is the key of a label name in Repo.Labels.
func lowerTrim(name string) string { return strings.ToLower(strings.TrimSpace(name)) }

func hasLabel(i *Issue, l *Label) bool {
	for _, x := range i.Labels {
		if x == l {
			return true
		}
	}
	return false
}

func checkLabelNames(names []string) *issueErr {
	for _, n := range names {
		if strings.TrimSpace(n) == "" {
			return errValidation("Label", "name", "missing_field", "")
		}
	}
	return nil
}

// parseLabelList reads labels given as an array of names or of {"name": …}
// objects, or as one name.
func parseLabelList(raw json.RawMessage, field string) ([]string, *issueErr) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errSchema(fmt.Sprintf("For 'properties/%s', %s is not an array.", field, raw))
	}
	names := make([]string, 0, len(items))
	for _, it := range items {
		var n string
		if json.Unmarshal(it, &n) == nil {
			names = append(names, n)
			continue
		}
		var obj struct {
			Name *string `json:"name"`
		}
		if json.Unmarshal(it, &obj) != nil || obj.Name == nil {
			return nil, errSchema(fmt.Sprintf("For 'items', %s is not a string or an object with a name.", it))
		}
		names = append(names, *obj.Name)
	}
	return names, nil
}

// parseLabelBody reads the body of POST and PUT /issues/{n}/labels:
// {"labels": [...]}, a bare array (what go-github sends) or one name.
func parseLabelBody(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	var raw json.RawMessage
	if !readJSON(w, r, &raw) {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		l, ok := obj["labels"]
		if !ok {
			errSchema(`"labels" wasn't supplied.`).write(w)
			return nil, false
		}
		raw = l
	}
	names, e := parseLabelList(raw, "labels")
	if e == nil {
		e = checkLabelNames(names)
	}
	if e != nil {
		e.write(w)
		return nil, false
	}
	return names, true
}

func (s *Sim) emitLabelLocked(repo *Repo, action string, l *Label, by *User, changes map[string]any) {
	if repo.Install == nil {
		return
	}
	body := map[string]any{"label": s.labelJSON(repo, l)}
	if changes != nil {
		body["changes"] = changes
	}
	s.emitLocked("label", action, nil, repo, by, body)
}

// ensureLabelLocked returns the repository's label of that name (any case),
// creating it with the default color (and label.created) when missing, as
// GitHub does for a label named on an issue.
func (s *Sim) ensureLabelLocked(repo *Repo, name string, by *User) *Label {
	name = strings.TrimSpace(name)
	if l := repo.Labels[strings.ToLower(name)]; l != nil {
		return l
	}
	l := &Label{ID: s.newID(), Name: name, Color: defaultLabelColor}
	repo.Labels[strings.ToLower(name)] = l
	s.emitLabelLocked(repo, "created", l, by, nil)
	return l
}

func (s *Sim) resolveLabelsLocked(repo *Repo, names []string, by *User) []*Label {
	var out []*Label
	seen := map[*Label]bool{}
	for _, n := range names {
		l := s.ensureLabelLocked(repo, n, by)
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}

// setIssueLabelsLocked makes target the issue's labels, recording an
// unlabeled event per label removed and a labeled event per label added.
// The caller sends the deliveries (emitLabelChangesLocked).
func (s *Sim) setIssueLabelsLocked(i *Issue, by *User, target []*Label, now time.Time) (removed, added []*Label) {
	want := map[*Label]bool{}
	for _, l := range target {
		want[l] = true
	}
	var kept []*Label
	for _, l := range i.Labels {
		if want[l] {
			kept = append(kept, l)
		} else {
			removed = append(removed, l)
		}
	}
	for _, l := range target {
		if !hasLabel(i, l) {
			added = append(added, l)
		}
	}
	i.Labels = append(kept, added...)
	sortLabels(i.Labels)
	for _, l := range removed {
		s.recordEventLocked(i, &IssueEvent{Event: "unlabeled", Actor: by, Label: labelCopy(l), CreatedAt: now})
	}
	for _, l := range added {
		s.recordEventLocked(i, &IssueEvent{Event: "labeled", Actor: by, Label: labelCopy(l), CreatedAt: now})
	}
	if len(removed)+len(added) > 0 {
		i.UpdatedAt = now
	}
	return removed, added
}

// replaceLabelsLocked is PUT semantics: the issue ends with exactly names.
func (s *Sim) replaceLabelsLocked(repo *Repo, i *Issue, by *User, names []string, now time.Time) (removed, added []*Label) {
	return s.setIssueLabelsLocked(i, by, s.resolveLabelsLocked(repo, names, by), now)
}

func (s *Sim) emitLabelChangesLocked(repo *Repo, i *Issue, by *User, removed, added []*Label) {
	for _, l := range removed {
		s.emitIssueLocked(repo, i, "unlabeled", by, map[string]any{"label": s.labelJSON(repo, l)})
	}
	for _, l := range added {
		s.emitIssueLocked(repo, i, "labeled", by, map[string]any{"label": s.labelJSON(repo, l)})
	}
}

// addLabelsLocked adds names to the issue (labels it has are left alone).
func (s *Sim) addLabelsLocked(repo *Repo, i *Issue, by *User, names []string) {
	target := append([]*Label(nil), i.Labels...)
	for _, l := range s.resolveLabelsLocked(repo, names, by) {
		if !hasLabel(i, l) {
			target = append(target, l)
		}
	}
	removed, added := s.setIssueLabelsLocked(i, by, target, s.now())
	s.emitLabelChangesLocked(repo, i, by, removed, added)
}

// setLabelsLocked replaces the issue's labels with names.
func (s *Sim) setLabelsLocked(repo *Repo, i *Issue, by *User, names []string) {
	removed, added := s.replaceLabelsLocked(repo, i, by, names, s.now())
	s.emitLabelChangesLocked(repo, i, by, removed, added)
}

// removeLabelLocked takes a label off the issue: 404 "Label does not exist"
// when the issue lacks it.
func (s *Sim) removeLabelLocked(repo *Repo, i *Issue, by *User, name string) *issueErr {
	l := repo.Labels[lowerTrim(name)]
	if l == nil || !hasLabel(i, l) {
		return &issueErr{code: http.StatusNotFound, msg: "Label does not exist"}
	}
	var target []*Label
	for _, x := range i.Labels {
		if x != l {
			target = append(target, x)
		}
	}
	removed, added := s.setIssueLabelsLocked(i, by, target, s.now())
	s.emitLabelChangesLocked(repo, i, by, removed, added)
	return nil
}

// createLabelLocked creates a repository label: 422 already_exists when a
// label of that name exists in any case.
func (s *Sim) createLabelLocked(repo *Repo, by *User, name, color, description string) (*Label, *issueErr) {
	name = strings.TrimSpace(name)
	if name == "" {
		return nil, errValidation("Label", "name", "missing_field", "")
	}
	if repo.Labels[strings.ToLower(name)] != nil {
		return nil, errValidation("Label", "name", "already_exists", "")
	}
	color = strings.TrimPrefix(color, "#")
	if color == "" {
		color = defaultLabelColor
	}
	if !hexColor.MatchString(color) {
		return nil, errValidation("Label", "color", "invalid", "")
	}
	if utf8.RuneCountInString(description) > 100 {
		return nil, errValidation("Label", "description", "custom", "description is too long (maximum is 100 characters)")
	}
	l := &Label{ID: s.newID(), Name: name, Color: strings.ToLower(color), Description: description}
	repo.Labels[strings.ToLower(name)] = l
	s.emitLabelLocked(repo, "created", l, by, nil)
	return l, nil
}

// editLabelLocked renames or recolors a label; issues carrying it follow.
func (s *Sim) editLabelLocked(repo *Repo, l *Label, by *User, newName, color, description *string) *issueErr {
	if newName != nil {
		n := strings.TrimSpace(*newName)
		if n == "" {
			return errValidation("Label", "name", "missing_field", "")
		}
		if o := repo.Labels[strings.ToLower(n)]; o != nil && o != l {
			return errValidation("Label", "name", "already_exists", "")
		}
		newName = &n
	}
	if color != nil {
		c := strings.ToLower(strings.TrimPrefix(*color, "#"))
		if !hexColor.MatchString(c) {
			return errValidation("Label", "color", "invalid", "")
		}
		color = &c
	}
	if description != nil && utf8.RuneCountInString(*description) > 100 {
		return errValidation("Label", "description", "custom", "description is too long (maximum is 100 characters)")
	}
	changes := map[string]any{}
	if newName != nil && *newName != l.Name {
		changes["name"] = map[string]any{"from": l.Name}
		delete(repo.Labels, strings.ToLower(l.Name))
		l.Name = *newName
		repo.Labels[strings.ToLower(l.Name)] = l
	}
	if color != nil && *color != l.Color {
		changes["color"] = map[string]any{"from": l.Color}
		l.Color = *color
	}
	if description != nil && *description != l.Description {
		changes["description"] = map[string]any{"from": l.Description}
		l.Description = *description
	}
	if len(changes) > 0 {
		s.emitLabelLocked(repo, "edited", l, by, changes)
	}
	return nil
}

// deleteLabelLocked deletes a label; it leaves every issue that had it
// (without issues.unlabeled deliveries or label events).
func (s *Sim) deleteLabelLocked(repo *Repo, l *Label, by *User) {
	delete(repo.Labels, strings.ToLower(l.Name))
	for _, i := range repo.Issues {
		if hasLabel(i, l) {
			var keep []*Label
			for _, x := range i.Labels {
				if x != l {
					keep = append(keep, x)
				}
			}
			i.Labels = keep
		}
	}
	s.emitLabelLocked(repo, "deleted", l, by, nil)
}

func sortedLabels(repo *Repo) []*Label {
	out := make([]*Label, 0, len(repo.Labels))
	for _, l := range repo.Labels {
		out = append(out, l)
	}
	sortLabels(out)
	return out
}

// --- REST handlers ---

func (s *Sim) writeLabelPage(w http.ResponseWriter, r *http.Request, repo *Repo, ls []*Label) {
	lo, hi := paginate(w, r, len(ls))
	writeJSON(w, http.StatusOK, s.labelsJSON(repo, ls[lo:hi]))
}

func (s *Sim) listRepoLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	s.writeLabelPage(w, r, repo, sortedLabels(repo))
}

type labelRequest struct {
	Name        *string `json:"name"`
	NewName     *string `json:"new_name"`
	Color       *string `json:"color"`
	Description *string `json:"description"`
}

func (s *Sim) createRepoLabel(w http.ResponseWriter, r *http.Request) {
	var req labelRequest
	if !readJSON(w, r, &req) {
		return
	}
	if req.Name == nil {
		errSchema(`"name" wasn't supplied.`).write(w)
		return
	}
	var color, desc string
	if req.Color != nil {
		color = *req.Color
	}
	if req.Description != nil {
		desc = *req.Description
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	repo := repoOf(r)
	l, e := s.createLabelLocked(repo, s.actorOf(r), *req.Name, color, desc)
	if e != nil {
		e.write(w)
		return
	}
	j := s.labelJSON(repo, l)
	w.Header().Set("Location", j["url"].(string))
	writeJSON(w, http.StatusCreated, j)
}

func (s *Sim) repoLabelParam(r *http.Request) (*Label, *issueErr) {
	l := repoOf(r).Labels[lowerTrim(labelNameParam(r))]
	if l == nil {
		return nil, errNotFound()
	}
	return l, nil
}

func (s *Sim) getRepoLabel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, e := s.repoLabelParam(r)
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.labelJSON(repoOf(r), l))
}

func (s *Sim) patchRepoLabel(w http.ResponseWriter, r *http.Request) {
	var req labelRequest
	if !readJSON(w, r, &req) {
		return
	}
	newName := req.NewName
	if newName == nil {
		newName = req.Name // go-github v66 sends the Label struct: "name"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, e := s.repoLabelParam(r)
	if e == nil {
		e = s.editLabelLocked(repoOf(r), l, s.actorOf(r), newName, req.Color, req.Description)
	}
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.labelJSON(repoOf(r), l))
}

func (s *Sim) deleteRepoLabel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, e := s.repoLabelParam(r)
	if e != nil {
		e.write(w)
		return
	}
	s.deleteLabelLocked(repoOf(r), l, s.actorOf(r))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) listIssueLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	s.writeLabelPage(w, r, repoOf(r), i.Labels)
}

// addIssueLabels is POST /issues/{n}/labels: adds; an empty list removes
// every label.
func (s *Sim) addIssueLabels(w http.ResponseWriter, r *http.Request) {
	names, ok := parseLabelBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	if len(names) == 0 {
		s.setLabelsLocked(repo, i, s.actorOf(r), nil)
	} else {
		s.addLabelsLocked(repo, i, s.actorOf(r), names)
	}
	writeJSON(w, http.StatusOK, s.labelsJSON(repo, i.Labels))
}

func (s *Sim) setIssueLabels(w http.ResponseWriter, r *http.Request) {
	names, ok := parseLabelBody(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	repo := repoOf(r)
	s.setLabelsLocked(repo, i, s.actorOf(r), names)
	writeJSON(w, http.StatusOK, s.labelsJSON(repo, i.Labels))
}

func (s *Sim) removeAllIssueLabels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e != nil {
		e.write(w)
		return
	}
	s.setLabelsLocked(repoOf(r), i, s.actorOf(r), nil)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sim) removeIssueLabel(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, e := s.issueParam(r)
	if e == nil {
		e = s.removeLabelLocked(repoOf(r), i, s.actorOf(r), labelNameParam(r))
	}
	if e != nil {
		e.write(w)
		return
	}
	writeJSON(w, http.StatusOK, s.labelsJSON(repoOf(r), i.Labels))
}

// sortedIssues lists a repository's issues by number.
func sortedIssues(repo *Repo) []*Issue {
	out := make([]*Issue, 0, len(repo.Issues))
	for _, i := range repo.Issues {
		out = append(out, i)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Number < out[b].Number })
	return out
}
