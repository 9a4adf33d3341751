package jinja

import "testing"

// Literals as Python reads them (expected texts rendered by jinja2 3.1.6):
// adjacent strings join, and a dict literal keeps keys that are not
// strings as they are (Qwen3's thinking budgets: {0: …, 512: …} |
// dictsort, then budget <= k).
func TestLiteralsMatchJinja2(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`{{ "a" "b" 'c' }}|{{ ("x" "y") | upper }}`, "abc|XY"},
		{`{% set m = {0: "none", 512: "low", 2048: "high"} %}{% for k, v in m | dictsort %}{% if 1000 <= k %}{{ v }},{% endif %}{% endfor %}|{{ m[512] }}|{{ m.keys() | list }}|{% for k in m %}{{ k + 1 }} {% endfor %}`,
			"high,|low|[0, 512, 2048]|1 513 2049 "},
		{`{% set m = {0: "none", 512: "low"} %}{{ 512 in m }}|{{ "512" in m }}|{{ m["512"] is defined }}|{{ m | tojson }}`, `True|False|False|{"0": "none", "512": "low"}`},
	} {
		got, err := renderWith(t, c.src, nil)
		if err != nil || got != c.want {
			t.Errorf("%s\ngot  %q (%v)\nwant %q", c.src, got, err, c.want)
		}
	}
}
