package ghsim

import (
	"fmt"
	"net/http"
	"unicode/utf8"
)

// Check run annotations (output.annotations of POST and PATCH
// /check-runs, GET /check-runs/{id}/annotations), as GitHub's REST
// description has them.

// annotationInput is one of output.annotations in POST and PATCH
// /check-runs.
type annotationInput struct {
	Path            *string `json:"path"`
	StartLine       *int    `json:"start_line"`
	EndLine         *int    `json:"end_line"`
	StartColumn     *int    `json:"start_column"`
	EndColumn       *int    `json:"end_column"`
	AnnotationLevel *string `json:"annotation_level"`
	Message         *string `json:"message"`
	Title           *string `json:"title"`
	RawDetails      *string `json:"raw_details"`
}

// CheckAnnotation is one annotation of a check run, as GitHub keeps it.
type CheckAnnotation struct {
	Path                   string
	StartLine, EndLine     int
	StartColumn, EndColumn *int
	Level                  string // notice, warning, failure
	Title, Message, Raw    string
}

// maxAnnotationsPerRequest is GitHub's limit on output.annotations in one
// request (the REST description's maxItems); more are added by updates,
// each appending to the run's annotations.
const maxAnnotationsPerRequest = 50

// checkAnnotations validates output.annotations as GitHub's REST
// description has them: at most 50, each with its path, lines, level and
// message; columns only on one line; a title of at most 255 characters and
// a message and raw details of at most 64 KB.
func checkAnnotations(in []annotationInput) ([]CheckAnnotation, *GitError) {
	if len(in) > maxAnnotationsPerRequest {
		return nil, invalidRequest(fmt.Sprintf("For 'properties/annotations', %d items were supplied; at most %d are allowed.", len(in), maxAnnotationsPerRequest))
	}
	out := make([]CheckAnnotation, 0, len(in))
	for _, a := range in {
		for _, req := range []struct {
			name string
			ok   bool
		}{{"path", a.Path != nil}, {"start_line", a.StartLine != nil}, {"end_line", a.EndLine != nil},
			{"annotation_level", a.AnnotationLevel != nil}, {"message", a.Message != nil}} {
			if !req.ok {
				return nil, invalidRequest(fmt.Sprintf("%q wasn't supplied.", req.name))
			}
		}
		switch *a.AnnotationLevel {
		case "notice", "warning", "failure":
		default:
			return nil, invalidRequest(fmt.Sprintf("For 'properties/annotation_level', %q is not a possible value.", *a.AnnotationLevel))
		}
		if (a.StartColumn != nil || a.EndColumn != nil) && *a.StartLine != *a.EndLine {
			return nil, gitInvalid("CheckRun", "annotations", "invalid", "start_column and end_column are only supported on one line")
		}
		if *a.EndLine < *a.StartLine {
			return nil, gitInvalid("CheckRun", "annotations", "invalid", "end_line is before start_line")
		}
		c := CheckAnnotation{Path: *a.Path, StartLine: *a.StartLine, EndLine: *a.EndLine, StartColumn: a.StartColumn, EndColumn: a.EndColumn,
			Level: *a.AnnotationLevel, Message: *a.Message}
		if a.Title != nil {
			if utf8.RuneCountInString(*a.Title) > 255 {
				return nil, gitInvalid("CheckRun", "annotations", "invalid", "title is longer than 255 characters")
			}
			c.Title = *a.Title
		}
		if a.RawDetails != nil {
			c.Raw = *a.RawDetails
		}
		if len(c.Message) > 64<<10 || len(c.Raw) > 64<<10 {
			return nil, gitInvalid("CheckRun", "annotations", "invalid", "message and raw_details are at most 64 KB")
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Sim) listAnnotations(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	repo, run := s.runOf(w, r)
	if run == nil {
		return
	}
	lo, hi := paginate(w, r, len(run.Annotations))
	str := func(v string) any { // GitHub answers null for an empty one
		if v == "" {
			return nil
		}
		return v
	}
	out := make([]any, 0, hi-lo)
	for _, a := range run.Annotations[lo:hi] {
		out = append(out, map[string]any{"path": a.Path, "blob_href": repoWeb(repo) + "/blob/" + run.HeadSHA + "/" + a.Path,
			"start_line": a.StartLine, "end_line": a.EndLine, "start_column": a.StartColumn, "end_column": a.EndColumn,
			"annotation_level": a.Level, "title": str(a.Title), "message": a.Message, "raw_details": str(a.Raw)})
	}
	writeJSON(w, http.StatusOK, out)
}
