package engine

// Validating a call's arguments against its tool's JSON Schema, with what is
// wrong said in words the model can act on.

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/kaptinlin/jsonschema"
)

// CompileSchema compiles a JSON Schema from someone lloyal does not trust
// (a tool's author, an MCP server, a harness file): the compiler's default
// loaders would fetch a remote "$ref" over HTTP while compiling, so they
// are removed and such a reference is an error instead.
func CompileSchema(params []byte) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	delete(c.Loaders, "http")
	delete(c.Loaders, "https")
	return c.Compile(params)
}

// ValidateArgs checks arguments against a tool's parameters the way the
// runtime does before Execute: "" when they are valid, otherwise what the
// model reads (the field and the rule). A schema that does not compile is an
// error.
func ValidateArgs(spec ToolSpec, args json.RawMessage) (string, error) {
	params := spec.Parameters
	if len(params) == 0 {
		params = json.RawMessage(`{"type":"object"}`)
	}
	sch, err := CompileSchema(params)
	if err != nil {
		return "", fmt.Errorf("tool %q parameters are not a valid JSON Schema: %w", spec.Name, err)
	}
	return validate(&toolEntry{spec: spec, schema: sch}, args), nil
}

// validate checks arguments against the tool's schema and says, in words the
// model can act on, what is wrong.
func validate(e *toolEntry, args json.RawMessage) string {
	var v any
	if err := json.Unmarshal(args, &v); err != nil {
		return fmt.Sprintf("The arguments for %s are not valid JSON (%v). Call it again with a JSON object.", e.spec.Name, err)
	}
	res := e.schema.Validate(v)
	if res.IsValid() {
		return ""
	}
	var problems []string
	collect(res.ToList(true), &problems)
	sort.Strings(problems)
	if len(problems) == 0 {
		problems = []string{"they do not match the schema"}
	}
	return fmt.Sprintf("Invalid arguments for %s: %s. Fix them and call again.", e.spec.Name, strings.Join(problems, "; "))
}

func collect(l *jsonschema.List, out *[]string) {
	if l == nil {
		return
	}
	for kw, msg := range l.Errors {
		field := strings.TrimPrefix(l.InstanceLocation, "/")
		if field == "" {
			field = "(arguments)"
		}
		s := fmt.Sprintf("field %s: %s (rule %s)", field, msg, kw)
		dup := false
		for _, o := range *out {
			if o == s {
				dup = true
			}
		}
		if !dup {
			*out = append(*out, s)
		}
	}
	for i := range l.Details {
		collect(&l.Details[i], out)
	}
}
