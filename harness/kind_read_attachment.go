package harness

import (
	"github.com/lloyal-ai/lloyal/engine"
	"github.com/lloyal-ai/lloyal/tools"
)

// readAttachmentKind is `builtin: read_attachment`: shows the model a file
// the run was given (--attach, the file's attachments:), an image as an
// image to a model that can see. A role lists it and is offered it only
// in runs given files.
var readAttachmentKind = kind{
	name:        "read_attachment",
	doc:         "of the files the run was given (--attach, attachments:)",
	build:       func(p *Program, t Tool) (engine.Tool, error) { return tools.AttachmentTool(p.o.Attachments), nil },
	attachments: true,
}
