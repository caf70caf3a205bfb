package threads

// Reasons of the threads tools' errors: the machine-readable code of the threads wire
// ({"error": {"code": …}}). Clients branch on them, so each is written once, here (the
// knowledge tools' are in internal/knowledge, the shared invalid_argument in apperr).
const (
	ReasonThreadNotFound     = "thread_not_found"
	ReasonMessageNotFound    = "message_not_found"
	ReasonUnknownPart        = "unknown_part"
	ReasonInvalidRecipient   = "invalid_recipient"
	ReasonCapabilityRequired = "capability_required"
	ReasonNotParticipant     = "not_participant"
	ReasonOwnPartOnly        = "own_part_only"
	ReasonThreadRequired     = "thread_required"
	ReasonUsageModelRequired = "usage_model_required"
	ReasonInvalidResetAt     = "invalid_reset_at"
	// A reply to a thread that takes no more: the reason names the thread's status.
	ReasonThreadClosed   = "thread_" + StatusClosed
	ReasonThreadCanceled = "thread_" + StatusCanceled
)
