// Package tokjson holds what every part of the tokenizer.json decoder shares: the error types that name a
// component by its JSON path, and small helpers for typed decoding of foreign JSON.
//
// It must not import any other gload package: normalize, pretok, model and decode all import it.
package tokjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrUnsupported is matched (errors.Is) by every UnsupportedError.
var ErrUnsupported = errors.New("tokenizer: unsupported component")

// UnsupportedError says that a tokenizer.json component, or one of its options, is not implemented.
// Path is the JSON path of the component, e.g. `pre_tokenizer.pretokenizers[1]`.
type UnsupportedError struct {
	Path   string // JSON path of the component
	Detail string // what is unsupported, e.g. `type "Foo"` or `dropout 0.1`
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("tokenizer: %s: unsupported %s", e.Path, e.Detail)
}

// Is makes errors.Is(err, ErrUnsupported) true.
func (e *UnsupportedError) Is(target error) bool { return target == ErrUnsupported }

// Unsupported builds an UnsupportedError.
func Unsupported(path, format string, args ...any) error {
	return &UnsupportedError{Path: path, Detail: fmt.Sprintf(format, args...)}
}

// InvalidError says that a component's JSON is malformed or inconsistent (bad field type, missing vocab entry ...).
type InvalidError struct {
	Path string
	Err  error
}

func (e *InvalidError) Error() string { return fmt.Sprintf("tokenizer: %s: %v", e.Path, e.Err) }
func (e *InvalidError) Unwrap() error { return e.Err }

// Invalid builds an InvalidError.
func Invalid(path, format string, args ...any) error {
	return &InvalidError{Path: path, Err: fmt.Errorf(format, args...)}
}

// IsNull reports whether raw is absent or the JSON literal null.
func IsNull(raw json.RawMessage) bool {
	trimmed := bytes.TrimSpace(raw)
	return len(trimmed) == 0 || string(trimmed) == "null"
}

// TypeOf reads the "type" field of a component object.
func TypeOf(raw json.RawMessage, path string) (string, error) {
	var head struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", Invalid(path, "not a component object: %v", err)
	}
	if head.Type == nil {
		return "", Invalid(path, "missing \"type\"")
	}
	return *head.Type, nil
}

// Decode unmarshals raw into v, naming path on failure.
func Decode(raw json.RawMessage, path string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return Invalid(path, "%v", err)
	}
	return nil
}

// Pattern is the `pattern` field of Split, Replace and similar components: exactly one of String or Regex.
type Pattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// Index returns a JSON path of a list element.
func Index(path, field string, i int) string { return fmt.Sprintf("%s.%s[%d]", path, field, i) }

// Missing is the InvalidError for a required field that a component lacks.
func Missing(path, field string) error { return Invalid(path, "missing field %q", field) }
