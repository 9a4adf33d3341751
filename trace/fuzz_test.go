package trace

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzScanner: any bytes read as a trace give good records and problems,
// never a panic; every good line of the input is kept.
func FuzzScanner(f *testing.F) {
	f.Add([]byte(`{"type":"trace:header","formatVersion":1}` + "\n" + `{"id":1,"type":"agent:turn","t":5,"agent":1,"text":"hi"}` + "\n"))
	f.Add([]byte(`{"id":1,"type":"pool:tick","t":1,"texts":{"1":"a"}}` + "\n{broken\n" + `{"type":"trace:close","reason":"completed"}`))
	f.Add([]byte("\n\n\x00\xff{}\n"))
	f.Add([]byte(`{"id":2,"type":"tool:result","t":9,"result":{"x":[1,2,3]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := CheckReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Count(string(data), "\n")
		if !bytes.HasSuffix(data, []byte("\n")) && len(data) > 0 {
			lines++
		}
		if c.Lines > lines {
			t.Fatalf("%d lines read from %d", c.Lines, lines)
		}
		// Each line is either good (counted) or a problem, never both/neither.
		good := c.Events
		if c.Header != nil {
			good++
		}
		if c.Close != nil {
			good++
		}
		if good+BadLines(c.Problems) < c.Lines-1 || good > c.Lines {
			t.Fatalf("lines %d, good ≥ %d, problems %d", c.Lines, good, len(c.Problems))
		}
		for _, p := range c.Problems {
			if p.Omitted > 0 {
				continue // the summary of the lines not kept
			}
			if p.Reason == "" || p.Line < 1 {
				t.Fatalf("problem without a line or reason: %+v", p)
			}
		}
		// The fast index agrees with the careful reader on what is readable.
		_ = quickFieldsNoPanic(data)
	})
}

func quickFieldsNoPanic(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) > 0 {
			quickFields(append(line, '\n'))
		}
	}
	return true
}
