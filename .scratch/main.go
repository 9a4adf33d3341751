package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/lloyal-ai/lloyal/tools"
	"github.com/lloyal-ai/lloyal/tools/research"
)

func main() {
	c, err := tools.LoadCorpusFS(research.Handbook(), research.HandbookName)
	if err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(os.Args[1])
	per := map[string][2]int{}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 4 || strings.HasPrefix(line, "#") {
			continue
		}
		files := strings.Split(f[2], ",")
		hits := c.Search(context.Background(), f[1], 3, nil)
		ok := len(hits) > 0 && slices.Contains(files, hits[0].Path)
		p := per[f[0]]
		p[1]++
		if ok {
			p[0]++
		} else if len(os.Args) > 2 {
			var got []string
			for _, h := range hits {
				got = append(got, fmt.Sprintf("%s:%s(%.1f)", h.Path, h.Lines, h.Score))
			}
			fmt.Printf("MISS %s\n   want %s\n   got  %s\n", f[1], f[2], strings.Join(got, "  "))
		}
		per[f[0]] = p
	}
	fmt.Println(per)
}
