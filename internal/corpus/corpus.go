// Package corpus finds the test corpora nobody here wrote, installed with npm
// (package.json pins them): GitHub's webhook examples
// (@octokit/webhooks-examples) and its REST description (@octokit/openapi).
// Conformance tests and benchmarks read them; the service never does.
package corpus

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// ErrMissing says the corpora are not installed; run `npm ci` at the
// repository root.
var ErrMissing = errors.New("test corpora not installed: run `npm ci` at the repository root")

// Root returns the node_modules directory holding the corpora: $WARDEN_CORPORA
// if set, else the nearest node_modules above the working directory.
func Root() (string, error) {
	if d := os.Getenv("WARDEN_CORPORA"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "@octokit")); err != nil {
			return "", fmt.Errorf("WARDEN_CORPORA=%s: %w", d, ErrMissing)
		}
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		nm := filepath.Join(dir, "node_modules")
		if _, err := os.Stat(filepath.Join(nm, "@octokit", "webhooks-examples")); err == nil {
			return nm, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrMissing
		}
		dir = parent
	}
}

// OpenAPIPath is the path of GitHub's REST description for api.github.com.
func OpenAPIPath() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "@octokit", "openapi", "generated", "api.github.com.json")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %w", p, ErrMissing)
	}
	return p, nil
}

var (
	examplesOnce sync.Once
	examples     map[string][]json.RawMessage
	examplesErr  error
)

// WebhookExamples returns GitHub's example payloads by event name, exactly as
// published (each example re-encoded as its raw JSON object).
func WebhookExamples() (map[string][]json.RawMessage, error) {
	examplesOnce.Do(func() {
		root, err := Root()
		if err != nil {
			examplesErr = err
			return
		}
		p := filepath.Join(root, "@octokit", "webhooks-examples", "api.github.com", "index.json")
		b, err := os.ReadFile(p)
		if err != nil {
			examplesErr = fmt.Errorf("read %s: %w", p, err)
			return
		}
		var idx []struct {
			Name     string            `json:"name"`
			Examples []json.RawMessage `json:"examples"`
		}
		if err := json.Unmarshal(b, &idx); err != nil {
			examplesErr = fmt.Errorf("parse %s: %w", p, err)
			return
		}
		examples = map[string][]json.RawMessage{}
		for _, e := range idx {
			examples[e.Name] = append(examples[e.Name], e.Examples...)
		}
	})
	return examples, examplesErr
}
