package modelgen

// Choice is a model as `lloyal model tiny` is asked for one: a preset, the
// shape fields given over it (Given says which, by flag name: layers,
// width, ff, heads, kv-heads, ctx, seed, type), a weight type and a
// tokenizer borrowed from another GGUF file.
type Choice struct {
	Preset, Vocab, Type string
	Shape               Options
	Given               func(flag string) bool
}

// Options is the preset's shape with the given fields over it.
func (c Choice) Options() (Options, error) {
	o, err := Preset(c.Preset)
	if err != nil {
		return o, err
	}
	for _, s := range []struct {
		flag     string
		dst, val *int
	}{{"layers", &o.Layers, &c.Shape.Layers}, {"width", &o.Embd, &c.Shape.Embd}, {"ff", &o.FF, &c.Shape.FF},
		{"heads", &o.Heads, &c.Shape.Heads}, {"kv-heads", &o.KVHeads, &c.Shape.KVHeads}, {"ctx", &o.CtxTrain, &c.Shape.CtxTrain}} {
		if c.Given(s.flag) {
			*s.dst = *s.val
		}
	}
	if c.Given("seed") {
		o.Seed = c.Shape.Seed
	}
	if c.Given("type") {
		if o.Type, err = WeightType(c.Type); err != nil {
			return o, err
		}
	}
	if c.Vocab != "" {
		if o.Vocab, err = VocabFrom(c.Vocab); err != nil {
			return o, err
		}
	}
	return o, nil
}
