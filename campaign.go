package switchboard

import (
	"maps"
	"time"
)

// Campaign statuses (docs/api.md).
const (
	CampaignDraft     = "draft"
	CampaignRunning   = "running"
	CampaignCompleted = "completed"
	CampaignCanceled  = "canceled"
)

// Limits of a campaign.
const (
	MaxCampaignName = 100
	// MaxCampaignList bounds a list of numbers or contact ids; the API's
	// 1 MiB body limit applies as well. Larger audiences are contacts
	// (all contacts).
	MaxCampaignList = 50_000
)

// Where a campaign's recipients come from: exactly one of these.
const (
	AudienceContactIDs  = "contact_ids"
	AudienceTo          = "to"
	AudienceAllContacts = "all_contacts"
)

// ErrorCodeCampaignCanceled is the error_code of a campaign message that was
// withdrawn, before it was handed to the provider, because its campaign was
// canceled. The message is failed with failure_reason CanceledReason.
const (
	ErrorCodeCampaignCanceled = "CAMPAIGN_CANCELED"
	CanceledReason            = "campaign canceled before the message was sent"
	// CanceledOnPhoneReason is the failure_reason of a campaign message
	// that a phone held when its campaign was canceled, and withdrew
	// before sending it.
	CanceledOnPhoneReason = "campaign canceled before the message was sent: the phone withdrew it from its queue"
	// CanceledByPhoneReason is the failure_reason of a message that its
	// phone's app canceled, unasked, before sending it (its owner did).
	CanceledByPhoneReason = "the phone's app canceled the message before sending it"
)

// Campaign is one message sent to many recipients. Its messages are ordinary
// messages carrying its id, created by a background runner after launch.
type Campaign struct {
	ID       string
	TenantID string
	Env      Environment
	Name     string
	// Body, or Template (a name) with TemplateBody (the template's text when
	// the campaign was created) and Data (variables under each contact's).
	Body         string
	Template     string
	TemplateBody string
	Data         map[string]string
	Channel      string
	// Audience is one of the Audience* constants; Recipients holds the
	// numbers (AudienceTo) or contact ids (AudienceContactIDs), deduplicated,
	// in the order given.
	Audience   string
	Recipients []string
	Status     string
	// Total is the number of recipients: known at creation for lists, at
	// launch for all contacts (a preview of the current count before).
	Total int
	// Progress of the expansion into messages: Position recipients done,
	// After the last contact id done (AudienceAllContacts), Expanded once
	// every recipient is done. Withdrawn is set when a canceled campaign's
	// unsent messages have been withdrawn.
	Position  int
	After     string
	Expanded  bool
	Withdrawn bool
	// Recipients done without a message, and messages deferred.
	SkippedOptedOut int
	SkippedInvalid  int
	DeferredQuiet   int
	DeferredLimits  int
	// Messages counts the campaign's messages by outcome.
	Messages    CampaignMessages
	CreatedAt   time.Time
	LaunchedAt  *time.Time
	CompletedAt *time.Time
	CanceledAt  *time.Time
}

// CampaignMessages counts a campaign's messages by status; Canceled counts
// the failed ones that were withdrawn by a cancel, and Failed the others.
type CampaignMessages struct {
	Queued, Sent, Delivered, Failed, Canceled int
}

// Pending is the number of recipients not yet turned into a message or
// skipped.
func (c *Campaign) Pending() int {
	return max(0, c.Total-c.Position)
}

// CampaignRecipient is one recipient of a chunk of a campaign, prepared by
// the runner: rendered and with its channel resolved. The store applies the
// rules that need consistent state (opt-out, limits, phone choice) when it
// stores the chunk.
type CampaignRecipient struct {
	// Message is nil when the recipient is skipped as invalid (a deleted
	// contact, a template variable without a value).
	Message *Message
	// After is the cursor once this recipient is done (AudienceAllContacts:
	// its contact id).
	After string
	// Quiet reports, for a send at t, whether the recipient is in quiet
	// hours and until when; nil means never.
	Quiet func(t time.Time) (time.Time, bool)
}

// CampaignChunk is the next recipients of a running campaign, to store in
// one transaction with the campaign's progress.
type CampaignChunk struct {
	Campaign *Campaign // as read when the chunk was prepared
	// Recipients are the next recipients after Campaign.Position.
	Recipients []CampaignRecipient
	// Last is set when these are the last recipients.
	Last            bool
	NewContactLimit int
	Now             time.Time
}

// ChunkResult is what became of a chunk.
type ChunkResult struct {
	// Done recipients were stored: none when the campaign had moved on
	// (another node stored the chunk, or it was canceled), fewer than the
	// chunk when Blocked.
	Done int
	// Blocked is set when a recipient could not be placed at all: no online
	// phone sends on its channel. The campaign waits.
	Blocked bool
}

// RecipientVariables returns the template variables of one recipient of a
// campaign: the campaign's data, under the recipient's number as "phone"
// and the contact's name (when it has one) as "name", under the contact's
// fields. c is nil for a recipient given by number.
func RecipientVariables(data map[string]string, number string, c *Contact) map[string]string {
	vars := make(map[string]string, len(data)+2)
	maps.Copy(vars, data)
	vars["phone"] = number
	if c != nil {
		if c.Name != "" {
			vars["name"] = c.Name
		}
		maps.Copy(vars, c.Fields)
	}
	return vars
}
