package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// signaturePrefix is the only scheme warden accepts in X-Hub-Signature-256.
const signaturePrefix = "sha256="

// Signature errors. They never include the secret or the expected value.
var (
	ErrNoSignature      = errors.New("missing X-Hub-Signature-256")
	ErrBadSignatureForm = errors.New("X-Hub-Signature-256 is not sha256=<64 hex digits>")
	ErrSignatureInvalid = errors.New("X-Hub-Signature-256 does not match the body under any configured secret")
)

// VerifySignature checks header (the X-Hub-Signature-256 value) against an
// HMAC-SHA256 of body under each secret, in constant time per secret. Several
// secrets are accepted so that a secret can be rotated without downtime.
func VerifySignature(secrets [][]byte, header string, body []byte) error {
	if header == "" {
		return ErrNoSignature
	}
	if !strings.HasPrefix(header, signaturePrefix) {
		return ErrBadSignatureForm
	}
	hexSig := header[len(signaturePrefix):]
	if len(hexSig) != sha256.Size*2 {
		return ErrBadSignatureForm
	}
	got := make([]byte, sha256.Size)
	if _, err := hex.Decode(got, []byte(hexSig)); err != nil {
		return ErrBadSignatureForm
	}
	ok := false
	for _, s := range secrets {
		m := hmac.New(sha256.New, s)
		m.Write(body)
		// Check every secret so the time taken does not say which matched.
		if hmac.Equal(m.Sum(nil), got) {
			ok = true
		}
	}
	if !ok {
		return ErrSignatureInvalid
	}
	return nil
}

// Sign returns the X-Hub-Signature-256 value for body under secret, as GitHub
// computes it. The simulator, the demo and tests use it.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return signaturePrefix + hex.EncodeToString(m.Sum(nil))
}
