package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// API calls warden's agent API with token: method, path under
// /api/v1/repos/{owner}/{repo}, a JSON body (or nil). It decodes the answer
// into out (when not nil) and returns the status code.
func (e *Env) API(ctx context.Context, token, method, path string, body, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	url := fmt.Sprintf("%s/api/v1/repos/%s%s", e.PublicURL, e.Repo.FullName, path)
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("decode %s %s answer (%d): %w: %s", method, path, resp.StatusCode, err, b)
		}
	}
	return resp.StatusCode, nil
}
