package harness

import (
	"fmt"

	"github.com/goccy/go-yaml/ast"
)

// maxAliasNodes bounds what a harness file's aliases add when expanded. An
// alias repeats what its anchor holds, and anchors can hold aliases: nine
// lines of ten aliases each expand to 10⁹ values (the "billion laughs"),
// which decoding would build in memory until the process died. A program
// of agents that reuses a profile or a schema by alias adds hundreds.
const maxAliasNodes = 100_000

// aliasProblem is a problem at the alias past which the file's aliases
// expand to more than maxAliasNodes nodes, or nil.
func aliasProblem(tree *ast.File) *Problem {
	anchors := map[string]int{} // each anchor's expanded size
	added := 0
	var over *ast.AliasNode
	var size func(n ast.Node) int
	size = func(n ast.Node) int {
		if over != nil || n == nil {
			return 0
		}
		switch n := n.(type) {
		case *ast.DocumentNode:
			return size(n.Body)
		case *ast.MappingNode:
			s := 1
			for _, v := range n.Values {
				s += size(v)
			}
			return s
		case *ast.MappingValueNode:
			return size(n.Key) + size(n.Value)
		case *ast.MappingKeyNode:
			return size(n.Value)
		case *ast.SequenceNode:
			s := 1
			for _, v := range n.Values {
				s += size(v)
			}
			return s
		case *ast.TagNode:
			return size(n.Value)
		case *ast.AnchorNode:
			s := size(n.Value)
			anchors[n.Name.String()] = s
			return s
		case *ast.AliasNode:
			s := anchors[n.Value.String()]
			if added += s; added > maxAliasNodes {
				over = n
			}
			return s
		default:
			return 1
		}
	}
	for _, d := range tree.Docs {
		size(d)
	}
	if over == nil {
		return nil
	}
	return &Problem{Line: over.GetToken().Position.Line, Msg: fmt.Sprintf("aliases here expand to more than %d values: write the values out, or alias less", maxAliasNodes)}
}
