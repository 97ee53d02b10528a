package idemd

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
)

// Request selectors: the fields that define a request, so that a retry which
// changes anything else (a trace id, a timestamp) replays instead of conflicting.
// The syntax and the rules are docs/api.md, "Request selectors", the same in every
// idemd client; the shared vectors are testdata/selectors.json.

// ErrInvalidSelector matches every refusal of NewSelector: a selector that cannot be
// right (the whole-document pointer "", a pointer not starting with "/", a "~" not
// followed by 0 or 1, a duplicate, a header name that is not a token).
var ErrInvalidSelector = errors.New("idemd: invalid selector")

// SelectorFields are what a Selector selects; each optional, and none (or only empty
// lists) is the whole body.
type SelectorFields struct {
	// Include lists JSON Pointers (RFC 6901: "/amount", "/recipient/iban", "/a~1b"
	// for the member "a/b") to the members that define the request.
	Include []string
	// Exclude lists JSON Pointers to members that do not.
	Exclude []string
	// Headers lists request header names, in any case (the HTTP middleware only).
	Headers []string
}

// Selector is a validated SelectorFields (make one with NewSelector). Its
// fingerprint of a request is the json-mode fingerprint of the selected document.
type Selector struct {
	fields  SelectorFields
	include [][]string
	exclude [][]string
	headers []string // lower case
}

// NewSelector validates fields; an error matching ErrInvalidSelector for a selector
// that cannot be right.
func NewSelector(fields SelectorFields) (*Selector, error) {
	include, err := selectorPointers("Include", fields.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := selectorPointers("Exclude", fields.Exclude)
	if err != nil {
		return nil, err
	}
	headers := make([]string, 0, len(fields.Headers))
	for _, name := range fields.Headers {
		if !isToken(name) {
			return nil, fmt.Errorf("%w: header name %q is not a token", ErrInvalidSelector, name)
		}
		lower := strings.ToLower(name)
		if slices.Contains(headers, lower) {
			return nil, fmt.Errorf("%w: Headers names %q twice", ErrInvalidSelector, name)
		}
		headers = append(headers, lower)
	}
	fields = SelectorFields{
		Include: slices.Clone(fields.Include),
		Exclude: slices.Clone(fields.Exclude),
		Headers: slices.Clone(fields.Headers),
	}
	return &Selector{fields: fields, include: include, exclude: exclude, headers: headers}, nil
}

// MustSelector is NewSelector for selectors written in the program: it panics on an
// invalid one, as regexp.MustCompile does.
func MustSelector(fields SelectorFields) *Selector {
	selector, err := NewSelector(fields)
	if err != nil {
		panic(err)
	}
	return selector
}

// Fields are the selector's fields, as given.
func (s *Selector) Fields() SelectorFields {
	return SelectorFields{
		Include: slices.Clone(s.fields.Include),
		Exclude: slices.Clone(s.fields.Exclude),
		Headers: slices.Clone(s.fields.Headers),
	}
}

// Empty reports whether nothing is selected (a nil Selector too): the request is the
// whole body, as without a selector.
func (s *Selector) Empty() bool {
	return s == nil || len(s.include) == 0 && len(s.exclude) == 0 && len(s.headers) == 0
}

// HeaderNames are the selected header names, in lower case.
func (s *Selector) HeaderNames() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.headers)
}

// Canonical is the RFC 8785 form of the document selected from a JSON body and the
// request's headers ([name, value] pairs in arrival order, names in any case): what
// is fingerprinted. A body the selector cannot apply to (not I-JSON; not a JSON
// object while Include or Exclude is given) is a *StatusError matching
// ErrInvalidRequest (INVALID_ARGUMENT), as the server would answer.
func (s *Selector) Canonical(body []byte, headers [][2]string) ([]byte, error) {
	document, err := s.document(body, headers)
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	document.write(&out)
	return []byte(out.String()), nil
}

// Fingerprint is the json-mode fingerprint of the selected document (Canonical).
func (s *Selector) Fingerprint(body []byte, headers [][2]string) ([32]byte, error) {
	canonical, err := s.Canonical(body, headers)
	if err != nil {
		return [32]byte{}, err
	}
	return domainSeparated("json", canonical), nil
}

func (s *Selector) document(body []byte, headers [][2]string) (jsonValue, error) {
	document, err := parseIJSON(body)
	if err != nil {
		return nil, selectionRefused("the body is not I-JSON: " + err.Error())
	}
	if s.Empty() {
		return document, nil
	}
	if len(s.include) > 0 || len(s.exclude) > 0 {
		if _, isObject := document.(jsonObject); !isObject {
			return nil, selectionRefused("include and exclude need a body that is a JSON object")
		}
	}
	if len(s.include) > 0 {
		selected := jsonObject{}
		for _, path := range s.include {
			if value, found := valueAt(document, path); found {
				selected = setAt(selected, path, value)
			}
		}
		document = selected
	}
	for _, path := range s.exclude {
		document = removeAt(document, path)
	}
	if len(s.headers) == 0 {
		return document, nil
	}
	picked := jsonObject{}
	for _, wanted := range s.headers {
		var values []string
		for _, header := range headers {
			if strings.ToLower(header[0]) == wanted {
				values = append(values, header[1])
			}
		}
		if len(values) > 0 {
			picked = append(picked, jsonMember{name: wanted, value: jsonString(strings.Join(values, ", "))})
		}
	}
	return jsonObject{{name: "body", value: document}, {name: "headers", value: picked}}, nil
}

func selectionRefused(message string) error {
	return invalidArgument("json_payload", message)
}

// invalidArgument is the INVALID_ARGUMENT the server would answer for field, made
// locally before any RPC.
func invalidArgument(field, message string) error {
	return &StatusError{
		Code:       codes.InvalidArgument,
		Message:    message,
		Reason:     ErrInvalidRequest.Reason(),
		Violations: []FieldViolation{{Field: field, Description: message}},
	}
}

func selectorPointers(field string, pointers []string) ([][]string, error) {
	paths := make([][]string, 0, len(pointers))
	for i, pointer := range pointers {
		if slices.Contains(pointers[:i], pointer) {
			return nil, fmt.Errorf("%w: %s names the pointer %q twice", ErrInvalidSelector, field, pointer)
		}
		path, err := pointerTokens(pointer)
		if err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// pointerTokens are the reference tokens of an RFC 6901 pointer, unescaped.
func pointerTokens(pointer string) ([]string, error) {
	switch {
	case pointer == "":
		return nil, fmt.Errorf("%w: the pointer \"\" (the whole document) cannot be included or excluded", ErrInvalidSelector)
	case !strings.HasPrefix(pointer, "/"):
		return nil, fmt.Errorf("%w: pointer %q does not start with /", ErrInvalidSelector, pointer)
	}
	for i := 0; i < len(pointer); i++ {
		if pointer[i] == '~' && (i+1 == len(pointer) || (pointer[i+1] != '0' && pointer[i+1] != '1')) {
			return nil, fmt.Errorf("%w: pointer %q: ~ must be followed by 0 or 1", ErrInvalidSelector, pointer)
		}
	}
	tokens := strings.Split(pointer[1:], "/")
	for i, token := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(token, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// isToken reports whether name is an HTTP token (RFC 9110): a valid header name.
func isToken(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alphanumeric := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alphanumeric && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

func (v jsonObject) member(name string) (jsonValue, int) {
	for i, member := range v {
		if member.name == name {
			return member.value, i
		}
	}
	return nil, -1
}

// valueAt is the value at path, walking objects only.
func valueAt(document jsonValue, path []string) (jsonValue, bool) {
	value := document
	for _, token := range path {
		object, isObject := value.(jsonObject)
		if !isObject {
			return nil, false
		}
		member, at := object.member(token)
		if at < 0 {
			return nil, false
		}
		value = member
	}
	return value, true
}

// setAt is object with value at path, intermediate objects made as needed; object
// itself is never changed (its members may be shared with the body).
func setAt(object jsonObject, path []string, value jsonValue) jsonObject {
	current, at := object.member(path[0])
	if len(path) > 1 {
		child, isObject := current.(jsonObject)
		if !isObject {
			child = jsonObject{}
		}
		value = setAt(child, path[1:], value)
	}
	out := slices.Clone(object)
	if at < 0 {
		return append(out, jsonMember{name: path[0], value: value})
	}
	out[at].value = value
	return out
}

// removeAt is document without the member at path (unchanged when the path does not
// resolve); document itself is never changed.
func removeAt(document jsonValue, path []string) jsonValue {
	object, isObject := document.(jsonObject)
	if !isObject {
		return document
	}
	current, at := object.member(path[0])
	if at < 0 {
		return document
	}
	out := slices.Clone(object)
	if len(path) == 1 {
		return slices.Delete(out, at, at+1)
	}
	out[at].value = removeAt(current, path[1:])
	return out
}
