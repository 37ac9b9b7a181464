package mcpfront

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The pre-decode check. encoding/json, which decodes every request, is
// lenient where a second parser would not be: the last of duplicate keys
// wins, field names match case-insensitively ("METHOD" fills Method), and
// nesting is bounded only by its own limit of 10000. One reader of a body
// (a proxy, an audit log, the schema validator of the arguments) could then
// see another request than the one that runs. checkBody reads the body once,
// before anything decodes it, and refuses:
//
//   - syntax errors and data after the value (-32700);
//   - nesting deeper than Config.MaxDepth (-32600);
//   - a key that occurs twice in one object, compared as encoding/json
//     compares them: after unescaping, with invalid UTF-8 as U+FFFD (-32600);
//   - in the objects decoded into Go structs (the envelope, params, and the
//     top level of params.arguments, which a worker decodes into its argument
//     type), two keys equal under encoding/json's case folding, and in the
//     envelope and params a key that folds to a field name without being it
//     ("Method", "taskID") (-32600).
//
// On the way it measures params.arguments and counts params.inputResponses,
// so the size limits need no second pass. It allocates nothing for ordinary
// requests (the scanner is pooled; keys are offsets into the body).

// bodyInfo is what checkBody learned about a well-formed body.
type bodyInfo struct {
	id        []byte // the envelope's raw "id" value, when seen
	argsLen   int    // bytes of params.arguments (0: absent)
	inputKeys int    // members of params.inputResponses when an object
	f         fieldSpans
}

// bodyError is a refusal from checkBody. id is the envelope's id when it was
// read before the problem (and is not the problem), so the error can echo it.
type bodyError struct {
	code int
	msg  string
	id   []byte
}

// Field names the front end decodes into Go structs, where encoding/json
// would take any case variant for them.
var (
	envelopeFields = []string{"jsonrpc", "id", "method", "params", "result", "error"}
	paramsFields   = []string{"_meta", "name", "arguments", "inputResponses", "requestState", "taskId", "cursor", "task", "protocolVersion", "capabilities", "clientInfo", "level"}
)

// role is what an object is to the front end.
type role uint8

const (
	roleOther    role = iota
	roleEnvelope      // the top-level object
	roleParams        // envelope.params
	roleArgs          // params.arguments
	roleInputs        // params.inputResponses
	roleID            // envelope.id
	roleMeta          // params._meta
)

// strict reports whether keys of this object are also compared case-folded.
func (r role) strict() bool { return r == roleEnvelope || r == roleParams || r == roleArgs }

// keyRef locates an object key: in the body, or (when the key had escapes
// or invalid UTF-8) in the scanner's arena, as encoding/json would decode it.
type keyRef struct {
	off, n uint32
	arena  bool
}

// linearKeys is the object size up to which duplicates are found by
// comparing each key with the ones before it; bigger objects are sorted.
const linearKeys = 16

type scanner struct {
	b        []byte
	i        int
	maxDepth int
	keys     []keyRef // keys of the objects being read, innermost last
	arena    []byte
	info     bodyInfo
	idSet    bool
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// checkBody checks a whole request body (see above).
func checkBody(b []byte, maxDepth int) (bodyInfo, *bodyError) {
	s := scanners.Get().(*scanner)
	info, err := s.check(b, maxDepth)
	// Keep no body alive in the pool, and no giant buffers.
	s.b, s.info = nil, bodyInfo{}
	if cap(s.keys) <= 1024 && cap(s.arena) <= 16<<10 {
		scanners.Put(s)
	}
	return info, err
}

// scanFailure is an error found while scanning, with the path to it built
// while the recursion unwinds.
type scanFailure struct {
	code int
	what string // message without the location
	key  string // the offending key, when a key is the problem
	path []string
	deep bool // too deep: the path would only repeat the body
}

func (s *scanner) check(b []byte, maxDepth int) (bodyInfo, *bodyError) {
	*s = scanner{b: b, maxDepth: maxDepth, keys: s.keys[:0], arena: s.arena[:0]}
	f := s.top()
	if f == nil {
		return s.info, nil
	}
	msg := f.what
	if f.code == codeInvalidRequest {
		msg = "invalid request: " + msg
		if len(f.path) > 0 {
			slices.Reverse(f.path)
			msg += " in " + strings.Join(f.path, "")
		}
	} else {
		msg = "parse error: " + msg
	}
	e := &bodyError{code: f.code, msg: msg}
	if f.code == codeInvalidRequest && s.idSet && !(len(f.path) == 0 && foldEqual([]byte(f.key), []byte("id"))) {
		e.id = s.info.id
	}
	return s.info, e
}

func (s *scanner) top() *scanFailure {
	s.ws()
	if s.i == len(s.b) {
		return s.syntax("empty body")
	}
	if f := s.value(1, roleEnvelope); f != nil {
		return f
	}
	s.ws()
	if s.i != len(s.b) {
		return s.syntax("data after the JSON value")
	}
	return nil
}

func (s *scanner) syntax(what string) *scanFailure {
	if what == "" {
		if s.i >= len(s.b) {
			what = "unexpected end of JSON input"
		} else {
			what = fmt.Sprintf("invalid character %s at offset %d", quoteByte(s.b[s.i]), s.i)
		}
	}
	return &scanFailure{code: codeParse, what: what}
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return fmt.Sprintf("%q", rune(c))
	}
	return fmt.Sprintf("0x%02x", c)
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

// value reads one value at depth (the depth a container here would have).
// r is the role the value plays; for scalars only roleID matters.
func (s *scanner) value(depth int, r role) *scanFailure {
	if s.i >= len(s.b) {
		return s.syntax("")
	}
	start := s.i
	switch c := s.b[s.i]; {
	case c == '{':
		if depth > s.maxDepth {
			return &scanFailure{code: codeInvalidRequest, deep: true, what: fmt.Sprintf("nesting deeper than %d", s.maxDepth)}
		}
		return s.object(depth, r)
	case c == '[':
		if depth > s.maxDepth {
			return &scanFailure{code: codeInvalidRequest, deep: true, what: fmt.Sprintf("nesting deeper than %d", s.maxDepth)}
		}
		return s.array(depth)
	case c == '"':
		if f := s.str(); f != nil {
			return f
		}
	case c == '-' || c >= '0' && c <= '9':
		if f := s.number(); f != nil {
			return f
		}
	case c == 't':
		if f := s.literal("true"); f != nil {
			return f
		}
	case c == 'f':
		if f := s.literal("false"); f != nil {
			return f
		}
	case c == 'n':
		if f := s.literal("null"); f != nil {
			return f
		}
	default:
		return s.syntax("")
	}
	if r == roleID && !s.idSet {
		s.info.id, s.idSet = s.b[start:s.i], true
	}
	return nil
}

func (s *scanner) literal(lit string) *scanFailure {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		for j := 0; j < len(lit) && s.i < len(s.b) && s.b[s.i] == lit[j]; j++ {
			s.i++ // point at the first wrong byte
		}
		return s.syntax("")
	}
	s.i += len(lit)
	return nil
}

func (s *scanner) digits() int {
	n := 0
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
		n++
	}
	return n
}

func (s *scanner) number() *scanFailure {
	if s.b[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i < len(s.b) && s.b[s.i] == '0':
		s.i++
	case s.digits() == 0:
		return s.syntax("")
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if s.digits() == 0 {
			return s.syntax("")
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if s.digits() == 0 {
			return s.syntax("")
		}
	}
	return nil
}

// strSpecial marks the bytes that end a run of plain string characters.
var strSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// str reads a string value, checking escapes.
func (s *scanner) str() *scanFailure {
	s.i++ // opening quote
	for {
		for s.i < len(s.b) && !strSpecial[s.b[s.i]] {
			s.i++
		}
		if s.i >= len(s.b) {
			return s.syntax("")
		}
		switch s.b[s.i] {
		case '"':
			s.i++
			return nil
		case '\\':
			if f := s.escape(); f != nil {
				return f
			}
		default: // a control character
			return s.syntax("")
		}
	}
}

// escape checks the escape at s.i and steps over it.
func (s *scanner) escape() *scanFailure {
	s.i++
	if s.i >= len(s.b) {
		return s.syntax("")
	}
	switch s.b[s.i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i++
		return nil
	case 'u':
		s.i++
		for range 4 {
			if s.i >= len(s.b) || !isHex(s.b[s.i]) {
				return s.syntax("")
			}
			s.i++
		}
		return nil
	}
	return s.syntax("")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// key reads an object key and returns where its decoded form is.
func (s *scanner) key() (keyRef, *scanFailure) {
	s.i++ // opening quote
	start := s.i
	esc, ascii := false, true
	for {
		for s.i < len(s.b) && !strSpecial[s.b[s.i]] {
			if s.b[s.i] >= utf8.RuneSelf {
				ascii = false
			}
			s.i++
		}
		if s.i >= len(s.b) {
			return keyRef{}, s.syntax("")
		}
		if s.b[s.i] == '"' {
			break
		}
		if s.b[s.i] != '\\' { // a control character
			return keyRef{}, s.syntax("")
		}
		esc = true
		if f := s.escape(); f != nil {
			return keyRef{}, f
		}
	}
	raw := s.b[start:s.i]
	s.i++ // closing quote
	if !esc && (ascii || utf8.Valid(raw)) {
		return keyRef{off: uint32(start), n: uint32(len(raw))}, nil
	}
	off := len(s.arena)
	s.arena = unquoteKey(s.arena, raw)
	return keyRef{off: uint32(off), n: uint32(len(s.arena) - off), arena: true}, nil
}

func (s *scanner) bytesOf(k keyRef) []byte {
	if k.arena {
		return s.arena[k.off : k.off+k.n]
	}
	return s.b[k.off : k.off+k.n]
}

// unquoteKey appends the string body raw (already checked) as encoding/json
// decodes it: escapes resolved, invalid UTF-8 and lone surrogates as U+FFFD.
func unquoteKey(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\' && raw[i+1] == 'u':
			r := hex4(raw[i+2 : i+6])
			i += 6
			if utf16.IsSurrogate(r) {
				if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
					if dec := utf16.DecodeRune(r, hex4(raw[i+2:i+6])); dec != utf8.RuneError {
						dst = utf8.AppendRune(dst, dec)
						i += 6
						continue
					}
				}
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
		case c == '\\':
			switch e := raw[i+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			default: // " \ /
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRune(raw[i:])
			dst = utf8.AppendRune(dst, r) // RuneError for invalid bytes
			i += n
		}
	}
	return dst
}

// hex4 reads four hex digits (already checked).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func (s *scanner) array(depth int) *scanFailure {
	s.i++
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		return nil
	}
	for n := 0; ; n++ {
		if f := s.value(depth+1, roleOther); f != nil {
			if f.code == codeInvalidRequest && !f.deep && len(f.path) < 64 {
				f.path = append(f.path, fmt.Sprintf("[%d]", n))
			}
			return f
		}
		s.ws()
		if s.i >= len(s.b) {
			return s.syntax("")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
		case ']':
			s.i++
			return nil
		default:
			return s.syntax("")
		}
	}
}

func (s *scanner) object(depth int, r role) *scanFailure {
	s.i++
	base, arenaBase := len(s.keys), len(s.arena)
	defer func() { s.keys, s.arena = s.keys[:base], s.arena[:arenaBase] }()
	s.ws()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		return nil
	}
	n := 0
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return s.syntax("")
		}
		k, f := s.key()
		if f != nil {
			return f
		}
		kb := s.bytesOf(k)
		if f := s.checkKey(r, kb, s.keys[base:]); f != nil {
			return f
		}
		s.keys = append(s.keys, k)
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax("")
		}
		s.i++
		s.ws()
		child := childRole(r, kb)
		start := s.i
		if f := s.value(depth+1, child); f != nil {
			if f.code == codeInvalidRequest && !f.deep && len(f.path) < 64 {
				f.path = append(f.path, pathKey(kb, r == roleEnvelope))
			}
			return f
		}
		if child == roleArgs {
			s.info.argsLen = s.i - start
		}
		s.capture(r, kb, start, s.i)
		n++
		s.ws()
		if s.i >= len(s.b) {
			return s.syntax("")
		}
		switch s.b[s.i] {
		case ',':
			s.i++
			s.ws()
			continue
		case '}':
			s.i++
		default:
			return s.syntax("")
		}
		break
	}
	if n > linearKeys {
		if f := s.sortedCheck(r, s.keys[base:]); f != nil {
			return f
		}
	}
	if r == roleInputs {
		s.info.inputKeys = n
	}
	return nil
}

// childRole is the role of the value under key k of an object playing r.
func childRole(r role, k []byte) role {
	switch r {
	case roleEnvelope:
		switch string(k) {
		case "params":
			return roleParams
		case "id":
			return roleID
		}
	case roleParams:
		switch string(k) {
		case "arguments":
			return roleArgs
		case "inputResponses":
			return roleInputs
		case "_meta":
			return roleMeta
		}
	}
	return roleOther
}

func pathKey(k []byte, top bool) string {
	sep := "."
	if top {
		sep = ""
	}
	if len(k) > 0 && len(k) <= 64 && !bytes.ContainsFunc(k, func(r rune) bool {
		return !(r == '_' || r == '$' || r == '-' || r == '/' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) {
		return sep + string(k)
	}
	return fmt.Sprintf("[%s]", quoteKey(k))
}

// quoteKey quotes a key for a message, cut to a readable length.
func quoteKey(k []byte) string {
	if len(k) > 64 {
		return fmt.Sprintf("%q…", k[:64])
	}
	return fmt.Sprintf("%q", k)
}

// checkKey compares a new key with the earlier keys of its object (while the
// object is small) and, in the envelope and params, with the field names.
func (s *scanner) checkKey(r role, k []byte, earlier []keyRef) *scanFailure {
	if len(earlier) < linearKeys {
		for _, e := range earlier {
			if f := s.clash(r, s.bytesOf(e), k); f != nil {
				return f
			}
		}
	}
	var fields []string
	switch r {
	case roleEnvelope:
		fields = envelopeFields
	case roleParams:
		fields = paramsFields
	default:
		return nil
	}
	for _, name := range fields {
		if string(k) == name {
			return nil
		}
	}
	for _, name := range fields {
		if foldEqual(k, []byte(name)) {
			return &scanFailure{code: codeInvalidRequest, key: string(k),
				what: fmt.Sprintf("key %s must be spelled %q", quoteKey(k), name)}
		}
	}
	return nil
}

// clash reports two keys of one object that must not both be there.
func (s *scanner) clash(r role, a, b []byte) *scanFailure {
	if bytes.Equal(a, b) {
		return &scanFailure{code: codeInvalidRequest, key: string(b), what: "duplicate key " + quoteKey(b)}
	}
	if r.strict() && foldEqual(a, b) {
		return &scanFailure{code: codeInvalidRequest, key: string(b),
			what: fmt.Sprintf("key %s differs only in case from key %s", quoteKey(b), quoteKey(a))}
	}
	return nil
}

// sortedCheck finds clashing keys of a big object by sorting them.
func (s *scanner) sortedCheck(r role, keys []keyRef) *scanFailure {
	cmp := func(a, b keyRef) int { return bytes.Compare(s.bytesOf(a), s.bytesOf(b)) }
	if r.strict() {
		cmp = func(a, b keyRef) int { return foldCompare(s.bytesOf(a), s.bytesOf(b)) }
	}
	slices.SortFunc(keys, cmp)
	for i := 1; i < len(keys); i++ {
		if cmp(keys[i-1], keys[i]) == 0 {
			return s.clash(r, s.bytesOf(keys[i-1]), s.bytesOf(keys[i]))
		}
	}
	return nil
}

// foldRune is how encoding/json folds a name's characters when it matches
// keys to struct fields.
func foldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if 'a' <= r && r <= 'z' {
			r -= 'a' - 'A'
		}
		return r
	}
	return unicode.ToUpper(unicode.ToLower(r))
}

// foldCompare orders names by their folded characters; 0 means
// encoding/json would match one to a field named the other.
func foldCompare(a, b []byte) int {
	for len(a) > 0 && len(b) > 0 {
		ra, na := rune(a[0]), 1
		if ra >= utf8.RuneSelf {
			ra, na = utf8.DecodeRune(a)
		}
		rb, nb := rune(b[0]), 1
		if rb >= utf8.RuneSelf {
			rb, nb = utf8.DecodeRune(b)
		}
		if fa, fb := foldRune(ra), foldRune(rb); fa != fb {
			if fa < fb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case len(a) == len(b):
		return 0
	case len(a) == 0:
		return -1
	}
	return 1
}

func foldEqual(a, b []byte) bool { return foldCompare(a, b) == 0 }
