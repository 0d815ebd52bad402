package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gload/gload/tokenize/chat/jinja"
)

// ValueFromJSON converts JSON text to a Jinja value the way Python's json.loads gives it to Jinja2: objects keep
// their key order, integers stay integers, other numbers are floats.
func ValueFromJSON(raw []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return jinja.Undefined(), err
	}
	if _, err := d.Token(); err != io.EOF {
		return jinja.Undefined(), fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '[':
			var items []jinja.Value
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return jinja.Undefined(), err
				}
				items = append(items, v)
			}
			if _, err := d.Token(); err != nil {
				return jinja.Undefined(), err
			}
			if items == nil {
				items = []jinja.Value{}
			}
			return jinja.NewList(items), nil
		case '{':
			out := jinja.NewDict()
			dict := out.AsDict()
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return jinja.Undefined(), err
				}
				k, _ := kt.(string)
				v, err := decodeValue(d)
				if err != nil {
					return jinja.Undefined(), err
				}
				dict.Set(k, v)
			}
			if _, err := d.Token(); err != nil {
				return jinja.Undefined(), err
			}
			return out, nil
		}
		return jinja.Undefined(), fmt.Errorf("unexpected %v", x)
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		s := x.String()
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return jinja.NewInt(n), nil
			}
		}
		f, err := x.Float64()
		if err != nil {
			return jinja.Undefined(), err
		}
		if f == math.Trunc(f) {
			// Jinja2 prints 1.0 (and tojson writes 1.0); the Go engine would write 1: refuse rather than differ.
			return jinja.Undefined(), fmt.Errorf("number %s: a float with an integral value is not supported (Jinja2 would print it as %s, the Go template engine as %d)",
				s, strconv.FormatFloat(f, 'f', 1, 64), int64(f))
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Undefined(), fmt.Errorf("unexpected JSON token %v", tok)
}
