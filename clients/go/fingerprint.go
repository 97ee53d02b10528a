package idemd

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Request fingerprints, computed exactly as idemd computes them:
//
//	fingerprint = SHA-256("idem.v1" 0x00 mode 0x00 canonical-bytes)
//
// mode "json": the RFC 8785 (JCS) form of an I-JSON document; mode "bytes": the
// payload as given. Prefer sending the payload (ExecuteOnce does) and letting the
// server fingerprint it; these are for callers that send a fingerprint, e.g. for
// requests above the server's payload bound (64 KiB by default).

// ErrNotIJSON matches every refusal of FingerprintJSON and CanonicalJSON: the server
// would answer INVALID_ARGUMENT, because canonicalization would merge distinct
// requests (duplicate keys, lone surrogates, integers beyond ±2^53, numbers of
// magnitude 2^53 or more with a fraction or exponent, numbers that are no integer
// but that a double rounds to one, numbers with more significant digits than a
// double holds: 100.10000000000000001 is the double of 100.1), or the text is not
// one JSON document.
var ErrNotIJSON = errors.New("idemd: not an I-JSON document")

const maxSafeInteger = 1 << 53

// maxJSONDepth bounds the nesting the parser follows (a stack, not the heap).
const maxJSONDepth = 512

// FingerprintBytes is the 32-byte fingerprint of an opaque payload (mode bytes).
func FingerprintBytes(payload []byte) [32]byte {
	return domainSeparated("bytes", payload)
}

// FingerprintJSON is the 32-byte fingerprint of a JSON document (mode json); an
// error matching ErrNotIJSON when the server would refuse the document.
func FingerprintJSON(document []byte) ([32]byte, error) {
	canonical, err := CanonicalJSON(document)
	if err != nil {
		return [32]byte{}, err
	}
	return domainSeparated("json", canonical), nil
}

func domainSeparated(mode string, canonical []byte) [32]byte {
	hash := sha256.New()
	hash.Write([]byte("idem.v1\x00" + mode + "\x00"))
	hash.Write(canonical)
	var sum [32]byte
	copy(sum[:], hash.Sum(nil))
	return sum
}

// CanonicalJSON is the RFC 8785 canonical form (UTF-8) of an I-JSON document.
func CanonicalJSON(document []byte) ([]byte, error) {
	value, err := parseIJSON(document)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	value.write(&out)
	return []byte(out.String()), nil
}

// parseIJSON is the value of an I-JSON document; an error matching ErrNotIJSON for
// what the server refuses.
func parseIJSON(document []byte) (jsonValue, error) {
	if !utf8.Valid(document) {
		return nil, refused("the document is not UTF-8")
	}
	p := &jsonParser{text: string(document)}
	p.skipSpace()
	value, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.text) {
		return nil, refused("content after the JSON document at byte %d", p.pos)
	}
	return value, nil
}

func refused(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotIJSON, fmt.Sprintf(format, args...))
}

// jsonValue is a parsed value, kept in the form it is written canonically.
type jsonValue interface{ write(*strings.Builder) }

type (
	jsonLiteral string // null, true, false, or a number already in canonical form
	jsonString  string
	jsonArray   []jsonValue
	jsonObject  []jsonMember
)

type jsonMember struct {
	name  string
	value jsonValue
}

func (v jsonLiteral) write(out *strings.Builder) { out.WriteString(string(v)) }
func (v jsonString) write(out *strings.Builder)  { writeJSONString(out, string(v)) }

func (v jsonArray) write(out *strings.Builder) {
	out.WriteByte('[')
	for i, item := range v {
		if i > 0 {
			out.WriteByte(',')
		}
		item.write(out)
	}
	out.WriteByte(']')
}

func (v jsonObject) write(out *strings.Builder) {
	// RFC 8785: members sorted by their names' UTF-16 code units.
	members := slices.Clone(v)
	slices.SortFunc(members, func(a, b jsonMember) int {
		return slices.Compare(utf16.Encode([]rune(a.name)), utf16.Encode([]rune(b.name)))
	})
	out.WriteByte('{')
	for i, member := range members {
		if i > 0 {
			out.WriteByte(',')
		}
		writeJSONString(out, member.name)
		out.WriteByte(':')
		member.value.write(out)
	}
	out.WriteByte('}')
}

func writeJSONString(out *strings.Builder, s string) {
	out.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\t':
			out.WriteString(`\t`)
		case '\n':
			out.WriteString(`\n`)
		case '\f':
			out.WriteString(`\f`)
		case '\r':
			out.WriteString(`\r`)
		default:
			if r < 0x20 {
				fmt.Fprintf(out, `\u%04x`, r)
			} else {
				out.WriteRune(r)
			}
		}
	}
	out.WriteByte('"')
}

// jsonParser is a strict RFC 8259 parser that keeps what I-JSON needs to refuse
// (duplicate names, lone surrogates, number literals) instead of losing it.
type jsonParser struct {
	text string
	pos  int
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.text) {
		switch p.text[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (jsonValue, error) {
	if depth > maxJSONDepth {
		return nil, refused("nested deeper than %d", maxJSONDepth)
	}
	if p.pos >= len(p.text) {
		return nil, refused("unexpected end of the document")
	}
	switch c := p.text[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		return jsonString(s), err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		for _, word := range []string{"null", "true", "false"} {
			if strings.HasPrefix(p.text[p.pos:], word) {
				p.pos += len(word)
				return jsonLiteral(word), nil
			}
		}
		return nil, refused("unexpected character at byte %d", p.pos)
	}
}

func (p *jsonParser) object(depth int) (jsonValue, error) {
	p.pos++ // {
	members := jsonObject{}
	seen := map[string]bool{}
	p.skipSpace()
	if p.pos < len(p.text) && p.text[p.pos] == '}' {
		p.pos++
		return members, nil
	}
	for {
		p.skipSpace()
		if p.pos >= len(p.text) || p.text[p.pos] != '"' {
			return nil, refused("expected a member name at byte %d", p.pos)
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, refused("duplicate object key %q", name)
		}
		seen[name] = true
		p.skipSpace()
		if p.pos >= len(p.text) || p.text[p.pos] != ':' {
			return nil, refused("expected ':' at byte %d", p.pos)
		}
		p.pos++
		p.skipSpace()
		value, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		members = append(members, jsonMember{name, value})
		p.skipSpace()
		if p.pos >= len(p.text) {
			return nil, refused("unexpected end of the document")
		}
		switch p.text[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return members, nil
		default:
			return nil, refused("expected ',' or '}' at byte %d", p.pos)
		}
	}
}

func (p *jsonParser) array(depth int) (jsonValue, error) {
	p.pos++ // [
	items := jsonArray{}
	p.skipSpace()
	if p.pos < len(p.text) && p.text[p.pos] == ']' {
		p.pos++
		return items, nil
	}
	for {
		p.skipSpace()
		item, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
		p.skipSpace()
		if p.pos >= len(p.text) {
			return nil, refused("unexpected end of the document")
		}
		switch p.text[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return items, nil
		default:
			return nil, refused("expected ',' or ']' at byte %d", p.pos)
		}
	}
}

func (p *jsonParser) string() (string, error) {
	p.pos++ // opening quote
	var out strings.Builder
	for {
		if p.pos >= len(p.text) {
			return "", refused("unterminated string")
		}
		c := p.text[p.pos]
		switch {
		case c == '"':
			p.pos++
			return out.String(), nil
		case c < 0x20:
			return "", refused("a control character in a string at byte %d", p.pos)
		case c == '\\':
			if err := p.escape(&out); err != nil {
				return "", err
			}
		default:
			r, size := utf8.DecodeRuneInString(p.text[p.pos:])
			out.WriteRune(r)
			p.pos += size
		}
	}
}

var shortEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func (p *jsonParser) escape(out *strings.Builder) error {
	if p.pos+1 >= len(p.text) {
		return refused("unterminated escape")
	}
	c := p.text[p.pos+1]
	p.pos += 2
	if r, ok := shortEscapes[c]; ok {
		out.WriteByte(r)
		return nil
	}
	if c != 'u' {
		return refused("invalid escape \\%c", c)
	}
	first, err := p.hex4()
	if err != nil {
		return err
	}
	if !utf16.IsSurrogate(first) {
		out.WriteRune(first)
		return nil
	}
	if first >= 0xDC00 || !strings.HasPrefix(p.text[p.pos:], `\u`) {
		return refused("a lone surrogate has no UTF-8 form")
	}
	p.pos += 2
	second, err := p.hex4()
	if err != nil {
		return err
	}
	combined := utf16.DecodeRune(first, second)
	if combined == utf8.RuneError {
		return refused("a lone surrogate has no UTF-8 form")
	}
	out.WriteRune(combined)
	return nil
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.text) {
		return 0, refused("truncated \\u escape")
	}
	value, err := strconv.ParseUint(p.text[p.pos:p.pos+4], 16, 16)
	if err != nil {
		return 0, refused("invalid \\u escape")
	}
	p.pos += 4
	return rune(value), nil
}

func (p *jsonParser) number() (jsonValue, error) {
	start := p.pos
	digits := func() int {
		n := 0
		for p.pos < len(p.text) && p.text[p.pos] >= '0' && p.text[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.text[p.pos] == '-' {
		p.pos++
	}
	integerStart := p.pos
	if n := digits(); n == 0 || (n > 1 && p.text[integerStart] == '0') {
		return nil, refused("malformed number at byte %d", start)
	}
	isInteger := true
	if p.pos < len(p.text) && p.text[p.pos] == '.' {
		p.pos++
		isInteger = false
		if digits() == 0 {
			return nil, refused("malformed number at byte %d", start)
		}
	}
	if p.pos < len(p.text) && (p.text[p.pos] == 'e' || p.text[p.pos] == 'E') {
		p.pos++
		isInteger = false
		if p.pos < len(p.text) && (p.text[p.pos] == '+' || p.text[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, refused("malformed number at byte %d", start)
		}
	}
	literal := p.text[start:p.pos]
	if isInteger {
		value, err := strconv.ParseInt(literal, 10, 64)
		if err != nil || value > maxSafeInteger || value < -maxSafeInteger {
			return nil, refused("integer %s is beyond ±2^53 and cannot be compared exactly", literal)
		}
		return jsonLiteral(strconv.FormatInt(value, 10)), nil
	}
	value, err := strconv.ParseFloat(literal, 64)
	if math.IsInf(value, 0) || math.IsNaN(value) || (err != nil && !errors.Is(err, strconv.ErrRange)) {
		return nil, refused("number %s is out of range", literal)
	}
	if math.Abs(value) >= maxSafeInteger {
		return nil, refused("a number of magnitude 2^53 or more cannot be compared exactly: %s", literal)
	}
	if value == math.Trunc(value) && !denotesAnInteger(literal) {
		return nil, refused("%s is not an integer but a double rounds it to %v", literal, value)
	}
	canonical := formatNumber(value)
	if exactDecimalOf(literal) != exactDecimalOf(canonical) {
		return nil, refused("the number %s has more significant digits than a double holds: it would be compared as %s", literal, canonical)
	}
	return jsonLiteral(canonical), nil
}

// exactDecimal is a number literal's exact decimal value, digits × 10^exponent with
// no leading or trailing zero digit (zero has no digits and no sign): two literals
// denote the same number exactly when their exactDecimals are equal. The server's
// rule (crates/idemd-domain/src/fingerprint.rs, ExactDecimal), mirrored.
type exactDecimal struct {
	negative bool
	digits   string
	exponent int64
}

func exactDecimalOf(literal string) exactDecimal {
	unsigned, negative := strings.CutPrefix(literal, "-")
	mantissa, exponentText, _ := strings.Cut(strings.ReplaceAll(unsigned, "E", "e"), "e")
	integerDigits, fractionDigits, _ := strings.Cut(mantissa, ".")
	significant := strings.TrimLeft(integerDigits+fractionDigits, "0")
	digits := strings.TrimRight(significant, "0")
	if digits == "" {
		return exactDecimal{}
	}
	exponent := saturatingAdd(decimalExponent(exponentText), -int64(len(fractionDigits)))
	exponent = saturatingAdd(exponent, int64(len(significant)-len(digits)))
	return exactDecimal{negative: negative, digits: digits, exponent: exponent}
}

// decimalExponent reads an exponent's digits, saturating at the int64 bounds.
func decimalExponent(text string) int64 {
	digits, negative := strings.CutPrefix(text, "-")
	digits = strings.TrimPrefix(digits, "+")
	var magnitude int64
	for _, digit := range []byte(digits) {
		if magnitude > (math.MaxInt64-9)/10 {
			magnitude = math.MaxInt64
			break
		}
		magnitude = magnitude*10 + int64(digit-'0')
	}
	if negative {
		return -magnitude
	}
	return magnitude
}

func saturatingAdd(a, b int64) int64 {
	sum := a + b
	switch {
	case a > 0 && b > 0 && sum < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && sum >= 0:
		return math.MinInt64
	}
	return sum
}

// denotesAnInteger: whether a number literal's decimal value is an integer, by its
// digits alone.
func denotesAnInteger(literal string) bool {
	unsigned := strings.TrimPrefix(literal, "-")
	mantissa, exponentText, _ := strings.Cut(strings.ReplaceAll(unsigned, "E", "e"), "e")
	integerDigits, fractionDigits, _ := strings.Cut(mantissa, ".")
	all := integerDigits + fractionDigits
	stripped := strings.TrimRight(all, "0")
	if stripped == "" {
		return true
	}
	trailingZeros := len(all) - len(stripped)
	exponent := 0
	if exponentText != "" {
		parsed, err := strconv.Atoi(exponentText)
		if err != nil { // beyond int: only its sign matters
			parsed = 1 << 30
			if strings.HasPrefix(exponentText, "-") {
				parsed = -parsed
			}
		}
		exponent = parsed
	}
	return exponent-len(fractionDigits)+trailingZeros >= 0
}

// formatNumber is ECMAScript's Number.prototype.toString, as RFC 8785 requires.
func formatNumber(value float64) string {
	if value == 0 {
		return "0"
	}
	sign := ""
	if value < 0 {
		sign, value = "-", -value
	}
	// Shortest round-trip digits d.ddd and exponent e: value = 0.digits × 10^n.
	mantissa, exponentText, _ := strings.Cut(strconv.FormatFloat(value, 'e', -1, 64), "e")
	digits := strings.TrimRight(strings.Replace(mantissa, ".", "", 1), "0")
	exponent, _ := strconv.Atoi(exponentText)
	k, n := len(digits), exponent+1
	var text string
	switch {
	case k <= n && n <= 21:
		text = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		text = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		text = "0." + strings.Repeat("0", -n) + digits
	default:
		e := n - 1
		text = digits[:1]
		if k > 1 {
			text += "." + digits[1:]
		}
		if e >= 0 {
			text += "e+" + strconv.Itoa(e)
		} else {
			text += "e-" + strconv.Itoa(-e)
		}
	}
	return sign + text
}
