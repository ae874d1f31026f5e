package crawler

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// OptionSpec describes one typed option of a crawler: its key (the json
// name of its field), its kind and its default. Workers advertise them in
// their membership znode so that the CLI checks a job's --set values at
// submission.
type OptionSpec struct {
	Key     string `json:"key"`
	Kind    string `json:"kind"` // string, int, float, bool, duration, strings
	Default string `json:"default,omitempty"`
	// Secret: a job's value is sealed with its secrets into the job
	// store, never in its spec or workflow, and reaches the crawler's
	// code only when a Runner decodes the job's options. A field tagged
	// baton:"secret" is one; its default is not advertised.
	Secret bool `json:"secret,omitempty"`
}

// optionsSchema is a crawler's options type and its defaults.
type optionsSchema struct {
	typ   reflect.Type // the struct type
	def   reflect.Value
	specs []OptionSpec
	index map[string]int // key → field index
}

// Validator is implemented by an options type that checks itself; it runs
// when a job's options are decoded (at the Runner, before the first page).
type Validator interface{ Validate() error }

// Options declares the crawler's typed options: defaults points to a
// struct whose exported fields of kind string, bool, int*, float*,
// time.Duration or []string are the options (keyed by their json name, or
// field name), and whose values are the defaults. A job sets them with
// `baton crawl --crawler NAME --set key=value`; the handlers read them with
// OptionsOf. It panics on a type it cannot decode into (a programming
// error, found at start).
func (c *Crawler) Options(defaults any) {
	v := reflect.ValueOf(defaults)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("crawler %s: Options wants a pointer to a struct, got %T", c.name, defaults))
	}
	s := &optionsSchema{typ: v.Elem().Type(), def: v.Elem(), index: map[string]int{}}
	for i := 0; i < s.typ.NumField(); i++ {
		f := s.typ.Field(i)
		if !f.IsExported() {
			continue
		}
		key := f.Name
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == "-" {
			continue
		} else if tag != "" {
			key = tag
		}
		kind := kindOf(f.Type)
		if kind == "" {
			panic(fmt.Sprintf("crawler %s: option %s: type %s is not supported", c.name, key, f.Type))
		}
		s.index[key] = i
		o := OptionSpec{Key: key, Kind: kind, Default: format(s.def.Field(i))}
		if f.Tag.Get("baton") == "secret" {
			o.Secret, o.Default = true, ""
		}
		s.specs = append(s.specs, o)
	}
	sort.Slice(s.specs, func(i, j int) bool { return s.specs[i].Key < s.specs[j].Key })
	c.options = s
}

// OptionSpecs are the crawler's options, sorted by key (none if it
// declared none).
func (c *Crawler) OptionSpecs() []OptionSpec {
	if c.options == nil {
		return nil
	}
	return c.options.specs
}

// DecodeOptions returns a pointer to a new options struct: the defaults,
// then sets applied, then Validate if the type has it. An unknown key or a
// bad value is an error naming it. A crawler without options accepts no
// sets and returns nil.
func (c *Crawler) DecodeOptions(sets map[string]string) (any, error) {
	if c.options == nil {
		if len(sets) > 0 {
			return nil, fmt.Errorf("crawler %s has no options (got %s)", c.name, strings.Join(sortedKeys(sets), ", "))
		}
		return nil, nil
	}
	s := c.options
	v := reflect.New(s.typ)
	v.Elem().Set(s.def)
	for _, k := range sortedKeys(sets) {
		i, ok := s.index[k]
		if !ok {
			return nil, fmt.Errorf("option %q: crawler %s has %s", k, c.name, keysOf(s.specs))
		}
		if err := set(v.Elem().Field(i), sets[k]); err != nil {
			if s.secret(k) {
				return nil, fmt.Errorf("option %s (secret, not shown): %w", k, err)
			}
			return nil, fmt.Errorf("option %s=%q: %w", k, sets[k], err)
		}
	}
	if val, ok := v.Interface().(Validator); ok {
		if err := val.Validate(); err != nil {
			return nil, fmt.Errorf("options of crawler %s: %w", c.name, err)
		}
	}
	return v.Interface(), nil
}

// CheckSets checks sets against advertised option specs (the CLI's check
// at submission, without the crawler's code): every key known, every
// value of its kind.
func CheckSets(crawler string, specs []OptionSpec, sets map[string]string) error {
	kinds := map[string]string{}
	for _, s := range specs {
		kinds[s.Key] = s.Kind
	}
	for _, k := range sortedKeys(sets) {
		kind, ok := kinds[k]
		if !ok {
			if len(specs) == 0 {
				return fmt.Errorf("option %q: crawler %s has no options", k, crawler)
			}
			return fmt.Errorf("option %q: crawler %s has %s", k, crawler, keysOf(specs))
		}
		if err := checkKind(kind, sets[k]); err != nil {
			if SecretKeys(specs)[k] {
				return fmt.Errorf("option %s (secret, not shown): %w", k, err)
			}
			return fmt.Errorf("option %s=%q: %w", k, sets[k], err)
		}
	}
	return nil
}

// SecretKeys are the keys of the secret options among specs.
func SecretKeys(specs []OptionSpec) map[string]bool {
	out := map[string]bool{}
	for _, o := range specs {
		if o.Secret {
			out[o.Key] = true
		}
	}
	return out
}

func (s *optionsSchema) secret(key string) bool { return SecretKeys(s.specs)[key] }

func kindOf(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "int"
	case reflect.Float32, reflect.Float64:
		return "float"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "strings"
		}
	}
	return ""
}

func checkKind(kind, s string) error {
	var err error
	switch kind {
	case "bool":
		_, err = strconv.ParseBool(s)
	case "int":
		_, err = strconv.ParseInt(s, 10, 64)
	case "float":
		_, err = strconv.ParseFloat(s, 64)
	case "duration":
		_, err = time.ParseDuration(s)
	}
	if err != nil {
		return fmt.Errorf("not a %s", kind)
	}
	return nil
}

func set(f reflect.Value, s string) error {
	if err := checkKind(kindOf(f.Type()), s); err != nil {
		return err
	}
	switch kindOf(f.Type()) {
	case "duration":
		d, _ := time.ParseDuration(s)
		f.SetInt(int64(d))
	case "string":
		f.SetString(s)
	case "bool":
		b, _ := strconv.ParseBool(s)
		f.SetBool(b)
	case "int":
		n, _ := strconv.ParseInt(s, 10, 64)
		if f.OverflowInt(n) {
			return fmt.Errorf("out of range")
		}
		f.SetInt(n)
	case "float":
		x, _ := strconv.ParseFloat(s, 64)
		f.SetFloat(x)
	case "strings":
		var parts []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		f.Set(reflect.ValueOf(parts).Convert(f.Type()))
	}
	return nil
}

func format(v reflect.Value) string {
	if v.Type() == reflect.TypeOf(time.Duration(0)) {
		return time.Duration(v.Int()).String()
	}
	if v.Kind() == reflect.Slice {
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return strings.Join(parts, ",")
	}
	b, _ := json.Marshal(v.Interface())
	return strings.Trim(string(b), `"`)
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func keysOf(specs []OptionSpec) string {
	var ks []string
	for _, s := range specs {
		ks = append(ks, s.Key+" ("+s.Kind+")")
	}
	return strings.Join(ks, ", ")
}

// OptionsOf returns the job's decoded options of type *T (as declared with
// Crawler.Options), or the zero T's pointer if the page carries none.
func OptionsOf[T any](p *Page) *T {
	if v, ok := p.options.(*T); ok {
		return v
	}
	return new(T)
}
