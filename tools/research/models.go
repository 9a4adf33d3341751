package research

// DemoModelContext is the context `lloyal run` gives the demo model unless
// told otherwise: the model is small (its cache costs 4 KiB a cell), so the
// planner, researchers, their helpers and the publisher get room side by
// side.
const DemoModelContext = 16384
