package webhooks

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// scanEnvelope reads the routing envelope from payload in one pass, with
// encoding/json's semantics for the fields it keeps (keys matched exactly,
// else case-insensitively; the last of duplicate keys wins, objects merging
// into one already decoded; null leaving a scalar alone and clearing a
// pointer or slice) and full validation of everything it skips. It answers
// ok only when it is sure: on anything it does not handle, or any error,
// ok is false and ParseMeta asks encoding/json itself, which is the
// reference (FuzzScanEnvelope holds the two to the same answers).
//
// encoding/json reads a payload twice (a validity scan, then the decoding
// that skips the fields it does not want) and was a fifth of the delivery
// path's CPU: GitHub's payloads are mostly fields warden's routing skips.
func scanEnvelope(payload []byte) (envelope, bool) {
	s := scanner{b: payload}
	var e envelope
	s.ws()
	if !s.object(func(key []byte) bool { return s.envelopeField(&e, key) }) {
		return envelope{}, false
	}
	s.ws()
	if s.i != len(s.b) {
		return envelope{}, false
	}
	return e, true
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// is matches a field name as encoding/json does: exactly, else folded.
func is(key []byte, name string) bool {
	return string(key) == name || bytes.EqualFold(key, []byte(name))
}

func (s *scanner) envelopeField(e *envelope, key []byte) bool {
	switch {
	case is(key, "action"):
		return s.str(&e.Action)
	case is(key, "number"):
		return s.int(&e.Number)
	case is(key, "ref"):
		return s.str(&e.Ref)
	case is(key, "installation"):
		return ptrObject(s, &e.Installation, func(v *struct {
			ID int64 `json:"id"`
		}, k []byte) bool {
			if is(k, "id") {
				return s.int64(&v.ID)
			}
			return s.skip()
		})
	case is(key, "repository"):
		return ptrObject(s, &e.Repository, func(v *struct {
			ID       int64  `json:"id"`
			FullName string `json:"full_name"`
		}, k []byte) bool {
			switch {
			case is(k, "id"):
				return s.int64(&v.ID)
			case is(k, "full_name"):
				return s.str(&v.FullName)
			}
			return s.skip()
		})
	case is(key, "sender"):
		return ptrObject(s, &e.Sender, func(v *struct {
			Login string `json:"login"`
			Type  string `json:"type"`
		}, k []byte) bool {
			switch {
			case is(k, "login"):
				return s.str(&v.Login)
			case is(k, "type"):
				return s.str(&v.Type)
			}
			return s.skip()
		})
	case is(key, "issue"):
		return ptrObject(s, &e.Issue, s.numberField)
	case is(key, "pull_request"):
		return ptrObject(s, &e.PullRequest, s.numberField)
	case is(key, "check_suite"):
		return ptrObject(s, &e.CheckSuite, s.checkRefField)
	case is(key, "check_run"):
		return ptrObject(s, &e.CheckRun, func(v *struct {
			HeadSHA      string      `json:"head_sha"`
			PullRequests []numberRef `json:"pull_requests"`
			CheckSuite   *checkRef   `json:"check_suite"`
		}, k []byte) bool {
			switch {
			case is(k, "head_sha"):
				return s.str(&v.HeadSHA)
			case is(k, "pull_requests"):
				return s.numberRefs(&v.PullRequests)
			case is(k, "check_suite"):
				return ptrObject(s, &v.CheckSuite, s.checkRefField)
			}
			return s.skip()
		})
	}
	return s.skip()
}

// numbered is the shape of the issue, the pull request and a check's
// pull request reference: only their number is read.
type numbered = struct {
	Number int `json:"number"`
}

func (s *scanner) numberField(v *numbered, k []byte) bool {
	if is(k, "number") {
		return s.int(&v.Number)
	}
	return s.skip()
}

func (s *scanner) checkRefField(v *checkRef, k []byte) bool {
	switch {
	case is(k, "head_sha"):
		return s.str(&v.HeadSHA)
	case is(k, "pull_requests"):
		return s.numberRefs(&v.PullRequests)
	}
	return s.skip()
}

// object reads an object, calling member for each key with the scanner at
// the member's value; member consumes the value.
func (s *scanner) object(member func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	s.i++
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.ws()
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.ws()
		key, ok := s.key()
		if !ok {
			return false
		}
		s.ws()
		if s.peek() != ':' {
			return false
		}
		s.i++
		s.ws()
		if !member(key) {
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// ptrObject decodes a pointer-to-struct field: null clears it, an object
// decodes into it (into the one already there, if any), anything else is a
// type error.
func ptrObject[T any](s *scanner, p **T, field func(v *T, key []byte) bool) bool {
	if s.literal("null") {
		*p = nil
		return true
	}
	if s.peek() != '{' {
		return false
	}
	if *p == nil {
		*p = new(T)
	}
	v := *p
	return s.object(func(k []byte) bool { return field(v, k) })
}

// numberRefs decodes a []numberRef field as encoding/json does: null clears
// it; an array refills it from the start, elements past the old length
// zero, elements within its capacity keeping what they held where an
// element is null.
func (s *scanner) numberRefs(dst *[]numberRef) bool {
	if s.literal("null") {
		*dst = nil
		return true
	}
	if s.peek() != '[' {
		return false
	}
	s.i++
	if s.depth++; s.depth > maxDepth {
		return false
	}
	v := (*dst)[:0]
	s.ws()
	if s.peek() == ']' {
		s.i++
		s.depth--
		if v == nil {
			v = []numberRef{}
		}
		*dst = v
		return true
	}
	for {
		s.ws()
		if len(v) < cap(v) {
			v = v[:len(v)+1]
		} else {
			v = append(v, numberRef{})
		}
		el := &v[len(v)-1]
		switch {
		case s.literal("null"):
		case s.peek() == '{':
			if !s.object(func(k []byte) bool { return s.numberField((*numbered)(el), k) }) {
				return false
			}
		default:
			return false
		}
		s.ws()
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			*dst = v
			return true
		default:
			return false
		}
	}
}

// literal consumes word if it is next.
func (s *scanner) literal(word string) bool {
	if bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		s.i += len(word)
		return true
	}
	return false
}

// str decodes a string field (null leaves it alone).
func (s *scanner) str(dst *string) bool {
	if s.literal("null") {
		return true
	}
	raw, plain, ok := s.stringToken()
	if !ok {
		return false
	}
	if plain {
		*dst = string(raw[1 : len(raw)-1])
		return true
	}
	// Escapes or invalid UTF-8: encoding/json's own decoding of the token.
	return json.Unmarshal(raw, dst) == nil
}

// int and int64 decode an integer field (null leaves it alone); a number
// with a fraction or exponent, or out of range, is a type error.
func (s *scanner) int(dst *int) bool {
	var n int64
	if s.literal("null") {
		return true
	}
	if !s.integer(&n, strconv.IntSize) {
		return false
	}
	*dst = int(n)
	return true
}

func (s *scanner) int64(dst *int64) bool {
	if s.literal("null") {
		return true
	}
	return s.integer(dst, 64)
}

func (s *scanner) integer(dst *int64, bits int) bool {
	start := s.i
	if !s.number() {
		return false
	}
	n, err := strconv.ParseInt(string(s.b[start:s.i]), 10, bits)
	if err != nil {
		return false
	}
	*dst = n
	return true
}

// key reads an object key: raw bytes when plain, else decoded.
func (s *scanner) key() ([]byte, bool) {
	raw, plain, ok := s.stringToken()
	if !ok {
		return nil, false
	}
	if plain {
		return raw[1 : len(raw)-1], true
	}
	var k string
	if json.Unmarshal(raw, &k) != nil {
		return nil, false
	}
	return []byte(k), true
}

// stringToken consumes a JSON string and returns it with its quotes;
// plain means it has no escapes and is valid UTF-8 (its bytes are its
// value).
func (s *scanner) stringToken() (raw []byte, plain, ok bool) {
	if s.peek() != '"' {
		return nil, false, false
	}
	start := s.i
	s.i++
	// The common string: no escape before its closing quote. Found with
	// the vectorised byte search, then checked for control characters.
	if j := bytes.IndexByte(s.b[s.i:], '"'); j >= 0 {
		span := s.b[s.i : s.i+j]
		if bytes.IndexByte(span, '\\') < 0 {
			for _, c := range span {
				if c < 0x20 {
					return nil, false, false
				}
			}
			s.i += j + 1
			raw = s.b[start:s.i]
			return raw, utf8.Valid(span), true
		}
	}
	plain = true
	for s.i < len(s.b) {
		// Most of a payload is string bytes with nothing to look at.
		for s.i < len(s.b) && !stringStop[s.b[s.i]] {
			s.i++
		}
		if s.i == len(s.b) {
			break
		}
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			raw = s.b[start:s.i]
			if plain && !utf8.Valid(raw) {
				plain = false
			}
			return raw, plain, true
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) {
					return nil, false, false
				}
				for _, h := range s.b[s.i+2 : s.i+6] {
					if !isHex(h) {
						return nil, false, false
					}
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			s.i++
		}
	}
	return nil, false, false
}

// stringStop marks the bytes a string scan must look at: its end, an
// escape, a control character.
var stringStop = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// number consumes a JSON number (RFC 8259's grammar).
func (s *scanner) number() bool {
	if s.peek() == '-' {
		s.i++
	}
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
	default:
		return false
	}
	if s.peek() == '.' {
		s.i++
		if !s.digits() {
			return false
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.i++
		if c := s.peek(); c == '+' || c == '-' {
			s.i++
		}
		if !s.digits() {
			return false
		}
	}
	return true
}

func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// skip consumes and validates any value.
func (s *scanner) skip() bool {
	switch c := s.peek(); {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip() })
	case c == '[':
		s.i++
		if s.depth++; s.depth > maxDepth {
			return false
		}
		s.ws()
		if s.peek() == ']' {
			s.i++
			s.depth--
			return true
		}
		for {
			s.ws()
			if !s.skip() {
				return false
			}
			s.ws()
			switch s.peek() {
			case ',':
				s.i++
			case ']':
				s.i++
				s.depth--
				return true
			default:
				return false
			}
		}
	case c == '"':
		_, _, ok := s.stringToken()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}
