package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/internal/jsondepth"
)

// SchemaProblem is one mistake in a JSON Schema: where (a JSON pointer
// into the schema, "" for its root) and what to do.
type SchemaProblem struct {
	Pointer, Msg string
}

// jsonTypes are the type names JSON Schema knows.
var jsonTypes = []string{"string", "number", "integer", "boolean", "array", "object", "null"}

// CheckSchema finds the mistakes in a tool's parameters (or a terminal's
// result schema) that would otherwise surface only when the model calls
// it: a schema the validator refuses to compile, and the ones it accepts
// but no call can satisfy as meant — a type name JSON Schema does not have
// ("str"), required that is not a list or names no property, an array
// without items (the model cannot know what to put in it), an empty enum.
// It walks properties, items, prefixItems, anyOf, oneOf, allOf, not and
// $defs; each problem's Pointer is inside schema. A schema past
// jsondepth.Tool (levels, references) is one problem,
// at its root.
func CheckSchema(schema []byte) []SchemaProblem {
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return []SchemaProblem{{Msg: fmt.Sprintf("not JSON: %v", err)}}
	}
	if err := jsondepth.Check(schema, jsondepth.Tool); err != nil {
		return []SchemaProblem{{Msg: fmt.Sprintf("%v (as JSON): the grammar of its calls could not be made; a tool's arguments need a few levels and references", err)}}
	}
	var out []SchemaProblem
	walkSchema(doc, "", &out)
	if len(out) == 0 {
		if _, err := CompileSchema(schema); err != nil {
			out = append(out, SchemaProblem{Msg: fmt.Sprintf("not a valid JSON Schema: %v", err)})
		}
	}
	return out
}

func walkSchema(node any, at string, out *[]SchemaProblem) {
	add := func(ptr, format string, args ...any) {
		*out = append(*out, SchemaProblem{Pointer: ptr, Msg: fmt.Sprintf(format, args...)})
	}
	s, ok := node.(map[string]any)
	if !ok {
		if _, isBool := node.(bool); !isBool {
			add(at, "a schema is a mapping (e.g. {type: string}), not %s", describeJSON(node))
		}
		return
	}
	types := schemaTypes(s["type"], at+"/type", add)
	if req, ok := s["required"]; ok {
		names, isList := req.([]any)
		if !isList {
			add(at+"/required", "required is a list of property names, e.g. required: [%v]", req)
		}
		props, hasProps := s["properties"].(map[string]any)
		for i, n := range names {
			name, isString := n.(string)
			switch {
			case !isString:
				add(fmt.Sprintf("%s/required/%d", at, i), "required lists property names (strings), not %s", describeJSON(n))
			case hasProps && props[name] == nil:
				add(fmt.Sprintf("%s/required/%d", at, i), "required names %q, which properties does not have: add it to properties or remove it here", name)
			}
		}
	}
	if p, ok := s["properties"]; ok {
		props, isMap := p.(map[string]any)
		if !isMap {
			add(at+"/properties", "properties is a mapping of each property's name to its schema")
		}
		for _, name := range sortedSchemaKeys(props) {
			walkSchema(props[name], at+"/properties/"+escapePointer(name), out)
		}
	}
	if slices.Contains(types, "array") && s["items"] == nil && s["prefixItems"] == nil {
		add(at, "an array needs items: the schema of its elements (e.g. items: {type: string}), or the model cannot know what to put in it")
	}
	if e, ok := s["enum"]; ok {
		if list, isList := e.([]any); !isList || len(list) == 0 {
			add(at+"/enum", "enum is a list of the values allowed, at least one")
		}
	}
	if it, ok := s["items"]; ok {
		walkSchema(it, at+"/items", out)
	}
	for _, k := range []string{"prefixItems", "anyOf", "oneOf", "allOf"} {
		if v, ok := s[k]; ok {
			list, isList := v.([]any)
			if !isList {
				add(at+"/"+k, "%s is a list of schemas", k)
			}
			for i, sub := range list {
				walkSchema(sub, fmt.Sprintf("%s/%s/%d", at, k, i), out)
			}
		}
	}
	if n, ok := s["not"]; ok {
		walkSchema(n, at+"/not", out)
	}
	for _, k := range []string{"$defs", "definitions"} {
		defs, _ := s[k].(map[string]any)
		for _, name := range sortedSchemaKeys(defs) {
			walkSchema(defs[name], at+"/"+k+"/"+escapePointer(name), out)
		}
	}
}

// schemaTypes are the type names a schema's type says (one or a list),
// each a name JSON Schema has; a wrong one is added as a problem at at.
func schemaTypes(v any, at string, add func(string, string, ...any)) []string {
	var names []any
	switch t := v.(type) {
	case nil:
		return nil
	case string:
		names = []any{t}
	case []any:
		names = t
	default:
		add(at, "type is a type name or a list of them (%s)", strings.Join(jsonTypes, ", "))
		return nil
	}
	var out []string
	for _, n := range names {
		name, _ := n.(string)
		if !slices.Contains(jsonTypes, name) {
			add(at, "%s is not a JSON Schema type: use %s%s", describeJSON(n), strings.Join(jsonTypes, ", "), nearType(name))
			continue
		}
		out = append(out, name)
	}
	return out
}

// nearType suggests the type name a wrong one was likely meant to be.
func nearType(name string) string {
	for _, t := range jsonTypes {
		if name != "" && (strings.HasPrefix(t, strings.ToLower(name)) || strings.HasPrefix(strings.ToLower(name), t)) {
			return fmt.Sprintf(" (%s?)", t)
		}
	}
	switch strings.ToLower(name) {
	case "int":
		return " (integer?)"
	case "bool":
		return " (boolean?)"
	case "float", "double":
		return " (number?)"
	case "list":
		return " (array?)"
	case "dict", "map":
		return " (object?)"
	}
	return ""
}

func describeJSON(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 40 {
		b = append(b[:40], "…"...)
	}
	return string(b)
}

func sortedSchemaKeys(m map[string]any) []string { return slices.Sorted(maps.Keys(m)) }

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
