package event

// ProgressData is a tool:progress event's data when its tool cannot say
// the total: how far it is by its own count (which may be a fraction).
type ProgressData struct {
	Value float64 `json:"value"`
}

// FailedNote is the name (Role) of the tool:note by which a tool says its
// call failed while its agent still reads the failure as the call's result
// and goes on (an ability whose server crashed, hung or answered an
// error): the call shows as failed and counts as an error, as a tool:error
// does, without ending its agent.
const FailedNote = "failed"
