// Package jsonscan reads a JSON document once, strictly, before
// encoding/json decodes it. encoding/json is lenient where a second parser
// would not be: the last of duplicate keys wins, field names match
// case-insensitively ("METHOD" fills Method), and nesting is bounded only by
// its own limit of 10000. One reader of a document (a proxy, an audit log, a
// schema validator) could then see another document than the one that is
// decoded. Check refuses:
//
//   - syntax errors and data after the value (Error.Syntax);
//   - nesting deeper than a limit;
//   - a key that occurs twice in one object, compared as encoding/json
//     compares them: after unescaping, with invalid UTF-8 as U+FFFD;
//   - in the objects a Schema marks Fold (decoded into Go structs), two keys
//     equal under encoding/json's case folding, and a key that folds to one
//     of the object's Fields without being it ("Method", "taskID").
//
// On the way it notes where the values of the members a Schema names are
// (Result), so the caller can take them without a second pass. It allocates
// nothing for ordinary documents (the scanner is pooled; keys are offsets
// into the document).
package jsonscan

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

// An Object says what the objects at one place in a document are to the
// caller. A nil *Object has no rules beyond those for every object.
type Object struct {
	// Fold: encoding/json decodes the object into a Go struct, matching keys
	// to field names case-insensitively. Two keys equal under its folding
	// are refused, and a member is found under any case of its name.
	Fold bool
	// Fields are the struct's field names: a key that folds to one without
	// being it is refused.
	Fields []string
	// Members are the members whose values are noted in Result.Spans.
	Members []Member
}

// A Member is a member whose value's place is noted.
type Member struct {
	Name   string
	Slot   int     // its index in Result.Spans
	Object *Object // the rules of the value when it is an object
}

// MaxSlots is how many member values one Result notes.
const MaxSlots = 24

// Span is where a value is in the document; End 0: absent.
type Span struct {
	Off, End int32
	Members  int32 // the number of members, when the value is an object
}

// In is the value's bytes in b, or nil when it is absent.
func (s Span) In(b []byte) []byte {
	if s.End == 0 {
		return nil
	}
	return b[s.Off:s.End:s.End]
}

// Len is the value's length in bytes (0: absent).
func (s Span) Len() int { return int(s.End - s.Off) }

// Result is what Check noted in a well-formed document.
type Result struct {
	Spans [MaxSlots]Span
}

// Error is Check's refusal.
type Error struct {
	Syntax bool   // the document is not JSON (else it is, but breaks a rule)
	What   string // what is wrong
	Path   string // where, when it is no syntax error: "" at the top level, else like "params.arguments.list[1]"
	Key    string // the offending key, when a key is the problem
}

func (e *Error) Error() string {
	if e.Path == "" {
		return "jsonscan: " + e.What
	}
	return "jsonscan: " + e.What + " in " + e.Path
}

// A Schema is the root object's rules, checked once.
type Schema struct{ root *Object }

// NewSchema checks root's slots: each is in range and used once. A mistake
// is a programming error: it panics.
func NewSchema(root *Object) *Schema {
	used := map[int]string{}
	var walk func(o *Object)
	walk = func(o *Object) {
		if o == nil {
			return
		}
		for _, m := range o.Members {
			if m.Slot < 0 || m.Slot >= MaxSlots {
				panic(fmt.Sprintf("jsonscan: member %q has slot %d, outside [0, %d)", m.Name, m.Slot, MaxSlots))
			}
			if prev, dup := used[m.Slot]; dup {
				panic(fmt.Sprintf("jsonscan: members %q and %q share slot %d", prev, m.Name, m.Slot))
			}
			used[m.Slot] = m.Name
			walk(m.Object)
		}
	}
	walk(root)
	return &Schema{root: root}
}

// member finds the member of o that key k is, as encoding/json would.
func (o *Object) member(k []byte) *Member {
	if o == nil {
		return nil
	}
	for i := range o.Members {
		if string(k) == o.Members[i].Name {
			return &o.Members[i]
		}
	}
	if o.Fold {
		for i := range o.Members {
			if foldEqual(k, []byte(o.Members[i].Name)) {
				return &o.Members[i]
			}
		}
	}
	return nil
}

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
	res      Result
	members  int32 // members of the value just read, when an object
}

var scanners = sync.Pool{New: func() any { return new(scanner) }}

// Check checks a whole document (see the package comment) with containers
// nested at most maxDepth deep.
func (sc *Schema) Check(b []byte, maxDepth int) (Result, *Error) {
	s := scanners.Get().(*scanner)
	res, err := s.check(b, maxDepth, sc.root)
	// Keep no document alive in the pool, and no giant buffers.
	s.b, s.res = nil, Result{}
	if cap(s.keys) <= 1024 && cap(s.arena) <= 16<<10 {
		scanners.Put(s)
	}
	return res, err
}

// scanFailure is an error found while scanning, with the path to it built
// while the recursion unwinds.
type scanFailure struct {
	syntax bool
	what   string // message without the location
	key    string // the offending key, when a key is the problem
	path   []string
	deep   bool // too deep: the path would only repeat the body
}

func (s *scanner) check(b []byte, maxDepth int, root *Object) (Result, *Error) {
	*s = scanner{b: b, maxDepth: maxDepth, keys: s.keys[:0], arena: s.arena[:0]}
	f := s.top(root)
	if f == nil {
		return s.res, nil
	}
	slices.Reverse(f.path)
	return s.res, &Error{Syntax: f.syntax, What: f.what, Path: strings.Join(f.path, ""), Key: f.key}
}

func (s *scanner) top(root *Object) *scanFailure {
	s.ws()
	if s.i == len(s.b) {
		return s.syntax("empty body")
	}
	if f := s.value(1, root, true); f != nil {
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
	return &scanFailure{syntax: true, what: what}
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
// o holds the rules of an object here; top: the document's value.
func (s *scanner) value(depth int, o *Object, top bool) *scanFailure {
	if s.i >= len(s.b) {
		return s.syntax("")
	}
	s.members = 0
	switch c := s.b[s.i]; {
	case c == '{':
		if depth > s.maxDepth {
			return &scanFailure{deep: true, what: fmt.Sprintf("nesting deeper than %d", s.maxDepth)}
		}
		return s.object(depth, o, top)
	case c == '[':
		if depth > s.maxDepth {
			return &scanFailure{deep: true, what: fmt.Sprintf("nesting deeper than %d", s.maxDepth)}
		}
		f := s.array(depth)
		s.members = 0
		return f
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
		if f := s.value(depth+1, nil, false); f != nil {
			if !f.syntax && !f.deep && len(f.path) < 64 {
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

func (s *scanner) object(depth int, o *Object, top bool) *scanFailure {
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
		if f := s.checkKey(o, kb, s.keys[base:]); f != nil {
			return f
		}
		s.keys = append(s.keys, k)
		s.ws()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return s.syntax("")
		}
		s.i++
		s.ws()
		m := o.member(kb)
		var child *Object
		if m != nil {
			child = m.Object
		}
		start := s.i
		if f := s.value(depth+1, child, false); f != nil {
			if !f.syntax && !f.deep && len(f.path) < 64 {
				f.path = append(f.path, pathKey(kb, top))
			}
			return f
		}
		if m != nil {
			s.res.Spans[m.Slot] = Span{Off: int32(start), End: int32(s.i), Members: s.members}
		}
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
		if f := s.sortedCheck(o, s.keys[base:]); f != nil {
			return f
		}
	}
	s.members = int32(n)
	return nil
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
// object is small) and with the object's field names.
func (s *scanner) checkKey(o *Object, k []byte, earlier []keyRef) *scanFailure {
	if len(earlier) < linearKeys {
		for _, e := range earlier {
			if f := s.clash(o, s.bytesOf(e), k); f != nil {
				return f
			}
		}
	}
	if o == nil {
		return nil
	}
	fields := o.Fields
	for _, name := range fields {
		if string(k) == name {
			return nil
		}
	}
	for _, name := range fields {
		if foldEqual(k, []byte(name)) {
			return &scanFailure{key: string(k), what: fmt.Sprintf("key %s must be spelled %q", quoteKey(k), name)}
		}
	}
	return nil
}

// clash reports two keys of one object that must not both be there.
func (s *scanner) clash(o *Object, a, b []byte) *scanFailure {
	if bytes.Equal(a, b) {
		return &scanFailure{key: string(b), what: "duplicate key " + quoteKey(b)}
	}
	if o != nil && o.Fold && foldEqual(a, b) {
		return &scanFailure{key: string(b), what: fmt.Sprintf("key %s differs only in case from key %s", quoteKey(b), quoteKey(a))}
	}
	return nil
}

// sortedCheck finds clashing keys of a big object by sorting them.
func (s *scanner) sortedCheck(o *Object, keys []keyRef) *scanFailure {
	cmp := func(a, b keyRef) int { return bytes.Compare(s.bytesOf(a), s.bytesOf(b)) }
	if o != nil && o.Fold {
		cmp = func(a, b keyRef) int { return foldCompare(s.bytesOf(a), s.bytesOf(b)) }
	}
	slices.SortFunc(keys, cmp)
	for i := 1; i < len(keys); i++ {
		if cmp(keys[i-1], keys[i]) == 0 {
			return s.clash(o, s.bytesOf(keys[i-1]), s.bytesOf(keys[i]))
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

// EqualFold reports whether encoding/json would match a key a to a struct
// field named b.
func EqualFold(a, b string) bool { return foldEqual([]byte(a), []byte(b)) }

// PlainString is the value of a JSON string or null that needs no
// unescaping, and false for anything else.
func PlainString(v []byte) (string, bool) {
	switch {
	case v == nil || string(v) == "null":
		return "", true
	case len(v) >= 2 && v[0] == '"' && bytes.IndexByte(v, '\\') < 0 && utf8.Valid(v):
		return string(v[1 : len(v)-1]), true
	}
	return "", false
}
