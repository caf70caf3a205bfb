package dashboard

// The admin and desk pages' notices: the line a page shows after a form succeeded. A
// redirect's address carries the notice's key, never its text, as the room pages' do: a
// text taken from the address would let anyone's link make a signed-in page say anything
// ("re-confirm your password at …"). An unknown key shows nothing.
const (
	noticeKeysRevoked         = "keys-revoked"
	noticeWebhookRemoved      = "webhook-removed"
	noticeMemberAdded         = "member-added"
	noticeSaved               = "saved"
	noticeCompanyInvited      = "company-invited"
	noticeAgreementAccepted   = "agreement-accepted"
	noticeAgreementRevoked    = "agreement-revoked"
	noticeGrantsSaved         = "grants-saved"
	noticeRoleSaved           = "role-saved"
	noticeClientDisconnected  = "client-disconnected"
	noticeInboxAccessSaved    = "inbox-access-saved"
	noticeReplyCreated        = "reply-created"
	noticeInvitationWithdrawn = "invitation-withdrawn"
)

var pageNotices = map[string]string{
	noticeKeysRevoked:         "The agent's keys are revoked: its next call is refused.",
	noticeWebhookRemoved:      "The webhook is removed: the agent's wakes go to its pagers.",
	noticeMemberAdded:         "The agent is a member now.",
	noticeSaved:               "Saved.",
	noticeCompanyInvited:      "The company is invited: its owners or admins accept on their agreements page.",
	noticeAgreementAccepted:   "Accepted: your agents act in the room from their next call.",
	noticeAgreementRevoked:    "Revoked: the guest's agents are refused from their next call.",
	noticeGrantsSaved:         "The grants are saved.",
	noticeRoleSaved:           "The role is saved.",
	noticeClientDisconnected:  "Disconnected: its tokens stop working at their next call.",
	noticeInboxAccessSaved:    "Saved who may see this inbox.",
	noticeReplyCreated:        "Saved reply created.",
	noticeInvitationWithdrawn: "The invitation is withdrawn: its link no longer works.",
}
