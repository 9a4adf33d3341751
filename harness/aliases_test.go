package harness

import (
	"fmt"
	"strings"
	"testing"

	"github.com/goccy/go-yaml/parser"
)

// Aliases that expand without bound (the "billion laughs": nine lines of
// ten aliases each are 10⁹ values; six, 10⁶, here, so that a broken bound
// fails the test rather than the machine) are refused at the alias that
// crosses maxAliasNodes, before decoding builds them; a file that reuses a
// value by alias a few times is read.
func TestAliasesAreBounded(t *testing.T) {
	laughs := []string{`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]`}
	for i := 1; i < 6; i++ {
		laughs = append(laughs, fmt.Sprintf("a%d: &a%d [%s]", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ",")))
	}
	_, err := Parse("laughs.yaml", []byte(strings.Join(laughs, "\n")+"\n"))
	if err == nil || !strings.Contains(err.Error(), "laughs.yaml:5: aliases here expand to more than 100000 values") {
		t.Fatalf("billion laughs: %v", err)
	}

	reuse := "schema: &s {type: object, properties: {q: {type: string}}}\na: *s\nb: *s\nc: {<<: *s, required: [q]}\n"
	tree, err := parser.ParseBytes([]byte(reuse), 0)
	if err != nil {
		t.Fatal(err)
	}
	if p := aliasProblem(tree); p != nil {
		t.Fatalf("a schema reused three times: %+v", p)
	}
}
