package knowledge

// Reasons of the knowledge tools' errors: the machine-readable code of the threads wire
// ({"error": {"code": …}}) and of the CI confirmation's answer. Clients branch on them,
// so each is written once, here.
const (
	ReasonKnowledgeNotFound     = "knowledge_not_found"
	ReasonWriteAccessRequired   = "write_access_required"
	ReasonAlreadyDecided        = "already_decided"
	ReasonStorageFailed         = "storage_failed"
	ReasonRedactionUnresolvable = "redaction_unresolvable"
	ReasonEmptyAfterRedaction   = "empty_after_redaction"
	ReasonQueryNotFound         = "query_not_found"
	ReasonNotReturned           = "not_returned"
	ReasonAlreadyReported       = "already_reported"
)
