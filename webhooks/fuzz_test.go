package webhooks

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"mime"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Signature modes of FuzzIngress: how the X-Hub-Signature-256 header is made.
const (
	sigFirstSecret  = iota // Sign(secretA, body)
	sigSecondSecret        // Sign(secretB, body)
	sigAsGiven             // the fuzzed string
	sigAbsent              // no header
	sigModes
)

// validFor reports, independently of the package, whether header is an HMAC
// of body under one of secrets.
func validFor(secrets [][]byte, header string, body []byte) bool {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return false
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	for _, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write(body)
		if hmac.Equal(m.Sum(nil), got) {
			return true
		}
	}
	return false
}

func FuzzIngress(f *testing.F) {
	issue := []byte(`{"action":"opened","issue":{"number":1},"repository":{"id":1,"full_name":"o/r"}}`)
	f.Add(issue, uint8(sigFirstSecret), "", "issues", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "application/json")
	f.Add(issue, uint8(sigSecondSecret), "", "issue_comment", "a1", "application/json; charset=utf-8")
	f.Add(issue, uint8(sigAsGiven), "sha256=00", "issues", "a2", "application/json")
	f.Add(issue, uint8(sigAsGiven), "sha1=0123456789abcdef0123456789abcdef01234567", "issues", "a3", "application/json")
	f.Add(issue, uint8(sigAsGiven), Sign(secretA, issue), "issues", "a4", "application/json")
	f.Add(issue, uint8(sigAsGiven), Sign(secretA, issue[1:]), "issues", "a5", "application/json")
	f.Add(issue, uint8(sigAbsent), "", "issues", "a6", "application/json")
	f.Add(issue, uint8(sigFirstSecret), "", "issues", "a7", "application/x-www-form-urlencoded")
	f.Add(issue, uint8(sigFirstSecret), "", "issues", "a8", "")
	f.Add(issue, uint8(sigFirstSecret), "", "", "a9", "application/json")
	f.Add(issue, uint8(sigFirstSecret), "", "issues", "", "application/json")
	f.Add(issue, uint8(sigFirstSecret), "", "issues", "../../x", "application/json")
	f.Add(issue, uint8(sigFirstSecret), "", "ping", "a10", "application/json")
	f.Add(issue, uint8(sigFirstSecret), "", "star", "a11", "application/json")
	f.Add([]byte{}, uint8(sigFirstSecret), "", "issues", "empty-body", "application/json")
	f.Add([]byte("not json at all"), uint8(sigFirstSecret), "", "push", "not-json", "application/json")
	f.Add([]byte{0xff, 0x00, 0xfe}, uint8(sigSecondSecret), "", "issues", "binary", "application/json")
	for i, tc := range envelopeCases {
		f.Add([]byte(tc.payload), uint8(i%2), "", tc.event, "env-"+tc.event, "application/json")
	}

	d := openTestDB(f, filepath.Join(f.TempDir(), "fuzz.db"))
	ib, err := OpenInbox(context.Background(), d)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		ib.Close()
		d.Close()
	})
	secrets := [][]byte{secretA, secretB}
	g := NewIngress(ib, NewMetrics(nil), discardLogger(), IngressOptions{
		Secrets: secrets,
		Handles: func(e string) bool {
			switch e {
			case "issues", "issue_comment", "pull_request", "push", "check_suite", "check_run", "installation":
				return true
			}
			return false
		},
	})
	rowCount := func(t *testing.T) int {
		var n int
		if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	allowed := map[int]bool{200: true, 202: true, 400: true, 401: true, 413: true, 415: true, 503: true}

	f.Fuzz(func(t *testing.T, body []byte, mode uint8, sig, event, delivery, contentType string) {
		r := httptest.NewRequest(http.MethodPost, "/webhooks", bytes.NewReader(body))
		switch mode % sigModes {
		case sigFirstSecret:
			r.Header.Set("X-Hub-Signature-256", Sign(secretA, body))
		case sigSecondSecret:
			r.Header.Set("X-Hub-Signature-256", Sign(secretB, body))
		case sigAsGiven:
			r.Header.Set("X-Hub-Signature-256", sig)
		}
		if event != "" {
			r.Header.Set("X-GitHub-Event", event)
		}
		if delivery != "" {
			r.Header.Set("X-GitHub-Delivery", delivery)
		}
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		valid := validFor(secrets, r.Header.Get("X-Hub-Signature-256"), body)
		before := rowCount(t)

		w := httptest.NewRecorder()
		g.ServeHTTP(w, r) // a panic fails the fuzz run

		code := w.Code
		if !allowed[code] {
			t.Fatalf("status %d is none of 200/202/400/401/413/415/503", code)
		}
		after := rowCount(t)
		if after != before && after != before+1 {
			t.Fatalf("one request changed the row count from %d to %d", before, after)
		}
		stored := after == before+1
		if stored && !(valid && code == http.StatusAccepted) {
			t.Fatalf("a row was stored with status %d, valid signature %v", code, valid)
		}
		if code == http.StatusAccepted && !stored {
			t.Fatalf("202 without a new row (no dead letters exist here, so 202 means stored)")
		}
		if !valid && code != http.StatusUnauthorized {
			t.Fatalf("a request without a valid signature got %d, want 401", code)
		}
		if code == http.StatusUnsupportedMediaType {
			if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt == "application/json" {
				t.Fatalf("415 for Content-Type %q", contentType)
			}
		}
		if stored {
			var seq int64
			var gotEvent string
			err := d.Read.QueryRow(`SELECT seq, event FROM inbox WHERE delivery_id = $1`, delivery).Scan(&seq, &gotEvent)
			if err != nil {
				t.Fatalf("the stored row is not under its delivery id %q: %v", delivery, err)
			}
			gotPayload, err := ib.Payload(context.Background(), seq)
			if err != nil {
				t.Fatalf("load the stored payload: %v", err)
			}
			if gotEvent != event || !bytes.Equal(gotPayload, body) {
				t.Fatalf("stored %q %q, want %q and the exact body", gotEvent, gotPayload, event)
			}
		}
	})
}

func FuzzParseMeta(f *testing.F) {
	for _, tc := range envelopeCases {
		f.Add(tc.event, []byte(tc.payload))
	}
	f.Add("issues", []byte(`null`))
	f.Add("issues", []byte(`[]`))
	f.Add("check_run", []byte(`{"check_run":{"pull_requests":[{"number":-1},{"number":99999999999}]}}`))
	f.Add("issues", []byte(`{"issue":{"number":"5"}}`))
	f.Add("push", []byte(`{"ref":"\u0000"}`))
	f.Fuzz(func(t *testing.T, event string, payload []byte) {
		start := time.Now()
		m, err := ParseMeta(event, payload)
		if time.Since(start) > 5*time.Second {
			t.Fatalf("ParseMeta took %s", time.Since(start))
		}
		if !json.Valid(payload) && err == nil {
			t.Fatalf("ParseMeta accepted invalid JSON %q", payload)
		}
		if err != nil {
			return
		}
		if m.OrderKey == "" {
			t.Fatal("empty order key")
		}
		if m.OrderKey[0] != 'r' && m.OrderKey[0] != 'i' {
			t.Fatalf("order key %q is neither a repository's nor an installation's", m.OrderKey)
		}
		if m.Number < 0 {
			t.Fatalf("negative number %d", m.Number)
		}
		m2, err := ParseMeta(event, payload)
		if err != nil || m2 != m {
			t.Fatalf("ParseMeta is not deterministic: %+v vs %+v (%v)", m, m2, err)
		}
	})
}

func FuzzVerifySignature(f *testing.F) {
	body := []byte(`{"action":"opened"}`)
	f.Add([]byte("secret"), body, Sign([]byte("secret"), body))
	f.Add([]byte("secret"), body, "sha256="+strings.ToUpper(Sign([]byte("secret"), body)[7:]))
	f.Add([]byte("secret"), body, Sign([]byte("other"), body))
	f.Add([]byte("secret"), body, "sha1=abc")
	f.Add([]byte(""), []byte(""), "")
	f.Add([]byte("s"), body, "sha256="+strings.Repeat("0", 64))
	f.Add([]byte("s"), body, "sha256="+strings.Repeat("g", 64))
	f.Fuzz(func(t *testing.T, secret, body []byte, header string) {
		want := Sign(secret, body)
		if err := VerifySignature([][]byte{secret}, want, body); err != nil {
			t.Fatalf("Sign's own output refused: %v", err)
		}
		if err := VerifySignature([][]byte{[]byte("unrelated"), secret}, want, body); err != nil {
			t.Fatalf("Sign's output refused with a second secret: %v", err)
		}
		err := VerifySignature([][]byte{secret}, header, body)
		if err == nil {
			// Accepted: the header is Sign's output (hex digits in either case).
			if !strings.HasPrefix(header, "sha256=") || strings.ToLower(header[7:]) != want[7:] {
				t.Fatalf("VerifySignature accepted %q, but Sign gives %q", header, want)
			}
		} else if header == want {
			t.Fatalf("VerifySignature refused Sign's output: %v", err)
		}
		if err := VerifySignature(nil, header, body); err == nil {
			t.Fatalf("accepted %q with no secrets configured", header)
		}
	})
}
