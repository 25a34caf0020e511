package webhooks

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"github.com/wardenhq/warden/internal/corpus"
)

// referenceEnvelope is encoding/json's reading of a payload: the answer
// scanEnvelope must give whenever it answers at all.
func referenceEnvelope(payload []byte) (envelope, error) {
	var e envelope
	err := json.Unmarshal(payload, &e)
	return e, err
}

// checkScan fails when scanEnvelope answers differently from encoding/json.
func checkScan(t testing.TB, payload []byte) (scanned bool) {
	t.Helper()
	got, ok := scanEnvelope(payload)
	want, err := referenceEnvelope(payload)
	if !ok {
		return false // ParseMeta asks encoding/json: nothing to compare
	}
	if err != nil {
		t.Fatalf("scanEnvelope accepted %q, which encoding/json refuses: %v", payload, err)
	}
	if !reflect.DeepEqual(metaOf("check_run", &got), metaOf("check_run", &want)) ||
		!reflect.DeepEqual(metaOf("issues", &got), metaOf("issues", &want)) ||
		!reflect.DeepEqual(metaOf("push", &got), metaOf("push", &want)) {
		t.Fatalf("scanEnvelope read %q as %+v, encoding/json as %+v", payload, metaOf("check_run", &got), metaOf("check_run", &want))
	}
	return true
}

var scanEdgeCases = []string{
	`{"action":"x","junk":[1,2,}`,
	`{"action":"x","junk":"unterminated}`,
	`{"action":"x","junk":{"a":tru}}`,
	`{"action":"x","junk":01}`,
	`{"action":"x","junk":"\x01"}`,
	`{"action":"x","junk":"bad \q escape"}`,
	`{"action":"x","junk":"\u12"}`,
	`{"action":"x"} trailing`,
	`{"Action":"upper","ACTION":"up2"}`,
	`{"action":"a","action":"b"}`,
	`{"\u0061ction":"escaped key"}`,
	`{"sender":{"login":"a"},"sender":{"type":"Bot"}}`,
	`{"sender":{"login":"a"},"sender":null}`,
	`{"sender":{"login":"a\u00e9\ud83d\ude00"}}`,
	`{"sender":{"login":"lone \ud800 surrogate"}}`,
	"{\"sender\":{\"login\":\"bad \xff utf8\"}}",
	"{\"\xffaction\":\"bad key\"}",
	`{"issue":{"number":"5"}}`,
	`{"issue":{"number":5.5}}`,
	`{"issue":{"number":1e2}}`,
	`{"issue":{"number":-0}}`,
	`{"issue":{"number":null},"number":7}`,
	`{"issue":[1]}`,
	`{"issue":"five"}`,
	`{"installation":{"id":99999999999999999999}}`,
	`{"installation":{"id":9223372036854775807}}`,
	`{"repository":{"full_name":"a/b","id":-3}}`,
	`{"ſender":{"login":"long s"}}`,
	`{"\u212a":1}`,
	`[1]`, `null`, `"str"`, `7`, ``, ` `, `{}`, `{ }`, `{"a":1,}`, `{,}`, `{"a" 1}`,
	`{"action":5}`, `{"action":true}`, `{"action":null}`,
	` {"action":"ws"} `,
	"\ufeff{\"action\":\"bom\"}",
	`{"check_run":{"head_sha":"abc","pull_requests":[{"number":3},{"number":2}]}}`,
	`{"check_run":{"pull_requests":[],"check_suite":{"pull_requests":[{"number":9}]}}}`,
	`{"check_run":{"pull_requests":[{"number":5}],"pull_requests":[null]}}`,
	`{"check_run":{"pull_requests":[{"number":5},{"number":6}],"pull_requests":[{"number":7}]}}`,
	`{"check_run":{"pull_requests":[7]}}`,
	`{"check_run":{"pull_requests":null}}`,
	`{"check_suite":{"head_sha":"s","pull_requests":[{"number":4,"x":[{}]}]}}`,
	`{"ref":"refs/heads/main","repository":{"id":1}}`,
	`{"a":[[[[[[[[[[]]]]]]]]]]}`,
	`{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":-01}`, `{"a":truex}`,
}

// TestScanEnvelopeAgreesWithEncodingJSON: on GitHub's own payloads (every
// example in @octokit/webhooks-examples), on the edge cases above, and on
// many random mutations of both, the one-pass scanner either steps aside or
// answers exactly what encoding/json answers. The examples must all take
// the fast path (the point of it).
func TestScanEnvelopeAgreesWithEncodingJSON(t *testing.T) {
	seeds := [][]byte{issuePayload(3, 14, "alice"), benchPayload(t)}
	ex, err := corpus.WebhookExamples()
	switch {
	case errors.Is(err, corpus.ErrMissing) && os.Getenv("CI") != "true":
		t.Logf("!!! test corpora not installed (run npm ci): GitHub's examples NOT checked, only the edge cases !!!")
	case err != nil:
		t.Fatal(err)
	}
	for event, list := range ex {
		for i, p := range list {
			if !checkScan(t, p) {
				t.Errorf("%s example %d did not take the fast path", event, i)
			}
			seeds = append(seeds, p)
		}
	}
	for _, c := range scanEdgeCases {
		checkScan(t, []byte(c))
		seeds = append(seeds, []byte(c))
	}
	rng := rand.New(rand.NewPCG(7, 11))
	alphabet := []byte(`{}[]":,\ u0a1-.eE+ntrfl` + "\x00\x1f\xff")
	for range 20000 {
		p := append([]byte(nil), seeds[rng.IntN(len(seeds))]...)
		for range 1 + rng.IntN(4) {
			if len(p) == 0 {
				break
			}
			i := rng.IntN(len(p))
			switch rng.IntN(3) {
			case 0:
				p[i] = alphabet[rng.IntN(len(alphabet))]
			case 1:
				p = append(p[:i], p[i+1:]...)
			default:
				p = append(p[:i], append([]byte{alphabet[rng.IntN(len(alphabet))]}, p[i:]...)...)
			}
		}
		checkScan(t, p)
	}
}

// FuzzScanEnvelope is the same comparison, open-ended (go test -fuzz).
func FuzzScanEnvelope(f *testing.F) {
	for _, c := range scanEdgeCases {
		f.Add([]byte(c))
	}
	if ex, err := corpus.WebhookExamples(); err == nil {
		for _, list := range ex {
			for _, p := range list[:min(len(list), 1)] {
				f.Add([]byte(p))
			}
		}
	}
	f.Fuzz(func(t *testing.T, p []byte) { checkScan(t, p) })
}

// BenchmarkParseMeta compares the one-pass scan with encoding/json on
// GitHub's issue_comment example.
func BenchmarkParseMeta(b *testing.B) {
	p := benchPayload(b)
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := ParseMeta("issue_comment", p); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(p)))
		for b.Loop() {
			if _, err := referenceEnvelope(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
