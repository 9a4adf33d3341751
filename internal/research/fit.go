package research

import "github.com/lloyal-ai/lloyal/engine"

// Limits are pressure limits in cells, how much of each finding a
// publisher's task holds, and how many characters of claims a grounded
// note holds (NoteChars, 0: all; KeepClaims), for one context.
type Limits struct{ Soft, Hard, FindingChars, NoteChars int }

// FindingChars is how much of each finding a publisher's task holds in a
// context of 8,192 cells or more.
const FindingChars = 1200

// Fitted are the limits for a context of nCtx cells decoded nBatch tokens
// at a time, and whether they differ from the defaults (the engine's
// pressure limits, 1,200-character findings, every claim in the note):
// below 8,192 cells they are in proportion to the context, as the defaults
// (1,024 and 512 cells) would leave a 2,048-cell context no room to work.
//
// A grounded publisher holds its note's claims four times (the note and
// the report it must copy, each offered in its tools and then written),
// beside the researchers' spine the session keeps for follow-ups: at
// 4,096 cells all of them (seven, from two researchers) left it under the
// soft limit once it had written the note, and it was stopped before
// write_note ran. NoteChars keeps the note to an eighth of the context in
// characters (512 at 4,096: the closest claim of each researcher, then
// the next of each, as they fit).
func Fitted(nCtx, nBatch int) (Limits, bool) {
	if nCtx >= engine.FullContext {
		return Limits{FindingChars: FindingChars}, false
	}
	hard := max(nBatch, min(engine.DefaultHardLimit, nCtx/16))
	return Limits{Hard: hard, Soft: max(hard+nBatch/2, min(engine.DefaultSoftLimit, nCtx/6)), FindingChars: max(120, nCtx/16), NoteChars: nCtx / 8}, true
}
