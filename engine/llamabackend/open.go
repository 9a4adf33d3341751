package llamabackend

import "github.com/lloyal-ai/lloyal/engine/llamacpp/model"

// OpenContext opens the model ref names (a GGUF file or an ollama model
// name, see Open) with its chat format as o.Format says, and one context
// over it as o says: what a run on this machine drives. closeAll frees the
// context, then the model.
func OpenContext(ref string, o ContextOptions) (be *Backend, closeAll func(), err error) {
	m, err := Open(ref, model.Options{}, o.Format)
	if err != nil {
		return nil, nil, err
	}
	be, err = New(m, o)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return be, func() { be.Close(); m.Close() }, nil
}
