package roles

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every validation and decoding error, so callers
// can tell bad metadata from I/O failures with errors.Is.
var ErrInvalid = errors.New("invalid metadata")

// FieldError names the object, the field and what is wrong with it.
type FieldError struct {
	Object string // "Task", "GroupState", ...
	Field  string // JSON field name, dotted for nested fields
	Msg    string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s.%s: %s", e.Object, e.Field, e.Msg)
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(obj, field, format string, args ...any) error {
	return &FieldError{Object: obj, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// decode unmarshals data into v strictly enough to name the field at fault.
func decode(obj string, data []byte, v any) error {
	if len(data) == 0 {
		return fieldErr(obj, "(document)", "empty document")
	}
	if string(bytes.TrimSpace(data)) == "null" { // json.Unmarshal would leave v as it is
		return fieldErr(obj, "(document)", "is null, want a JSON object")
	}
	if err := json.Unmarshal(data, v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			field := ute.Field
			if field == "" { // the document itself has the wrong type (e.g. an array)
				field = "(document)"
			}
			return fieldErr(obj, field, "has JSON type %s, want %s", ute.Value, ute.Type)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return fieldErr(obj, "(document)", "malformed JSON at byte %d: %v", se.Offset, err)
		}
		return fieldErr(obj, "(document)", "%v", err)
	}
	return nil
}
