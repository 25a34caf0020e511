package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// refSign is an independent HMAC-SHA256 signature, to check Sign against.
func refSign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestVerifySignature(t *testing.T) {
	body := []byte(`{"action":"opened","issue":{"number":1}}`)
	good := refSign(secretA, body)
	hexPart := good[len("sha256="):]
	both := [][]byte{secretA, secretB}

	cases := []struct {
		name    string
		secrets [][]byte
		header  string
		body    []byte
		want    error
	}{
		{"empty header", both, "", body, ErrNoSignature},
		{"sha1 prefix", both, "sha1=" + hexPart[:40], body, ErrBadSignatureForm},
		{"upper-case prefix", both, "SHA256=" + hexPart, body, ErrBadSignatureForm},
		{"no prefix", both, hexPart, body, ErrBadSignatureForm},
		{"prefix only", both, "sha256=", body, ErrBadSignatureForm},
		{"short hex", both, "sha256=" + hexPart[:63], body, ErrBadSignatureForm},
		{"long hex", both, good + "0", body, ErrBadSignatureForm},
		{"non-hex", both, "sha256=" + strings.Repeat("z", 64), body, ErrBadSignatureForm},
		{"one non-hex digit", both, "sha256=" + hexPart[:63] + "g", body, ErrBadSignatureForm},
		{"space around", both, " " + good, body, ErrBadSignatureForm},
		{"trailing space", both, good + " ", body, ErrBadSignatureForm},
		{"wrong secret", [][]byte{[]byte("other")}, good, body, ErrSignatureInvalid},
		{"no secrets configured", nil, good, body, ErrSignatureInvalid},
		{"other body", both, good, append(append([]byte{}, body...), ' '), ErrSignatureInvalid},
		{"empty body signed by another body", both, good, nil, ErrSignatureInvalid},
		{"one bit off", both, "sha256=" + flipLastHex(hexPart), body, ErrSignatureInvalid},
		{"right secret", [][]byte{secretA}, good, body, nil},
		{"first of two secrets", both, good, body, nil},
		{"second of two secrets", both, refSign(secretB, body), body, nil},
		{"upper-case hex", both, "sha256=" + strings.ToUpper(hexPart), body, nil},
		{"empty body", both, refSign(secretA, nil), nil, nil},
		{"empty secret", [][]byte{{}}, refSign(nil, body), body, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := VerifySignature(tc.secrets, tc.header, tc.body)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("VerifySignature = %v, want %v", err, tc.want)
			}
			if err != nil {
				for _, s := range tc.secrets {
					if len(s) > 0 && strings.Contains(err.Error(), string(s)) {
						t.Fatalf("error %q reveals a secret", err)
					}
				}
				if strings.Contains(err.Error(), hexPart) {
					t.Fatalf("error %q reveals the expected signature", err)
				}
			}
		})
	}
}

func flipLastHex(h string) string {
	last := h[len(h)-1]
	repl := byte('0')
	if last == '0' {
		repl = '1'
	}
	return h[:len(h)-1] + string(repl)
}

func TestSignRoundTrip(t *testing.T) {
	bodies := [][]byte{nil, {}, []byte("{}"), []byte(strings.Repeat("x", 100000)), {0, 1, 2, 255}}
	secrets := [][]byte{nil, []byte("s"), []byte(strings.Repeat("k", 200))}
	for _, s := range secrets {
		for _, b := range bodies {
			sig := Sign(s, b)
			if sig != refSign(s, b) {
				t.Fatalf("Sign = %s, want %s", sig, refSign(s, b))
			}
			if len(sig) != len("sha256=")+64 || !strings.HasPrefix(sig, "sha256=") {
				t.Fatalf("Sign output %q is not sha256=<64 hex>", sig)
			}
			if err := VerifySignature([][]byte{s}, sig, b); err != nil {
				t.Fatalf("VerifySignature(Sign) = %v", err)
			}
			if err := VerifySignature([][]byte{[]byte("x"), s}, sig, b); err != nil {
				t.Fatalf("VerifySignature(Sign) with a second secret = %v", err)
			}
			if err := VerifySignature([][]byte{append([]byte{'!'}, s...)}, sig, b); err == nil {
				t.Fatal("a signature verified under a different secret")
			}
		}
	}
}
