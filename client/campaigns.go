package client

import (
	"context"
	"iter"
	"net/http"
	"time"
)

// CampaignStatus is the state of a campaign: CampaignDraft -> (launch)
// CampaignRunning -> CampaignCompleted; draft or running -> (cancel)
// CampaignCanceled.
type CampaignStatus string

// The campaign statuses.
const (
	CampaignDraft     CampaignStatus = "draft"
	CampaignRunning   CampaignStatus = "running"
	CampaignCompleted CampaignStatus = "completed"
	CampaignCanceled  CampaignStatus = "canceled"
)

// Audience says where a campaign's recipients come from.
type Audience string

// The audiences.
const (
	AudienceContactIDs  Audience = "contact_ids"
	AudienceTo          Audience = "to"
	AudienceAllContacts Audience = "all_contacts"
)

// Campaign is one message to many recipients.
type Campaign struct {
	ID       string         `json:"id"`
	Name     string         `json:"name"`
	Status   CampaignStatus `json:"status"`
	Body     *string        `json:"body"`
	Template *string        `json:"template"`
	// Data are the campaign's template variables, as text.
	Data        map[string]string `json:"data"`
	Channel     Channel           `json:"channel"`
	Audience    Audience          `json:"audience"`
	Counts      CampaignCounts    `json:"counts"`
	CreatedAt   time.Time         `json:"created_at"`
	LaunchedAt  *time.Time        `json:"launched_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	CanceledAt  *time.Time        `json:"canceled_at"`
}

// CampaignCounts follow a campaign's recipients: each is in exactly one of
// Pending, SkippedOptedOut, SkippedInvalid or the message counts Queued,
// Sent, Delivered, Failed, Canceled, which add up to Total.
type CampaignCounts struct {
	Total              int `json:"total"`
	Pending            int `json:"pending"`
	Queued             int `json:"queued"`
	Sent               int `json:"sent"`
	Delivered          int `json:"delivered"`
	Failed             int `json:"failed"`
	Canceled           int `json:"canceled"`
	SkippedOptedOut    int `json:"skipped_opted_out"`
	SkippedInvalid     int `json:"skipped_invalid"`
	DeferredQuietHours int `json:"deferred_quiet_hours"`
	DeferredLimits     int `json:"deferred_limits"`
}

// CreateCampaignParams are the fields of a new campaign: Name, exactly one
// of Body or Template (with Data), and exactly one of ContactIDs, To or
// AllContacts.
type CreateCampaignParams struct {
	Name     string         `json:"name"`
	Body     string         `json:"body,omitempty"`
	Template string         `json:"template,omitempty"`
	Data     map[string]any `json:"data,omitempty"`
	// Channel is ChannelSMS, ChannelChat or ChannelAuto; empty is auto.
	Channel    Channel  `json:"channel,omitempty"`
	ContactIDs []string `json:"contact_ids,omitempty"`
	To         []string `json:"to,omitempty"`
	// AllContacts sends to every contact that exists at launch.
	AllContacts bool `json:"all_contacts,omitempty"`
}

// CreateCampaign creates a draft campaign (POST /v1/campaigns); nothing is
// sent until LaunchCampaign.
func (c *Client) CreateCampaign(ctx context.Context, p CreateCampaignParams) (*Campaign, error) {
	return c.campaignCall(ctx, http.MethodPost, p, "v1", "campaigns")
}

// GetCampaign returns a campaign with its counts (GET /v1/campaigns/{id});
// an unknown id is 404 CAMPAIGN_NOT_FOUND.
func (c *Client) GetCampaign(ctx context.Context, id string) (*Campaign, error) {
	return c.campaignCall(ctx, http.MethodGet, nil, "v1", "campaigns", id)
}

// ListCampaigns iterates over the campaigns of the key's environment, newest
// first (GET /v1/campaigns). p may be nil.
func (c *Client) ListCampaigns(ctx context.Context, p *ListParams) iter.Seq2[*Campaign, error] {
	return list[Campaign](ctx, c, p.values(nil), "v1", "campaigns")
}

// LaunchCampaign starts a draft campaign (POST /v1/campaigns/{id}/launch);
// it returns at once, running. Anything but a draft is 409
// CAMPAIGN_NOT_DRAFT.
func (c *Client) LaunchCampaign(ctx context.Context, id string) (*Campaign, error) {
	return c.campaignCall(ctx, http.MethodPost, nil, "v1", "campaigns", id, "launch")
}

// CancelCampaign cancels a draft or running campaign
// (POST /v1/campaigns/{id}/cancel); its messages not yet sent are
// withdrawn. Canceling a completed or canceled campaign changes nothing.
func (c *Client) CancelCampaign(ctx context.Context, id string) (*Campaign, error) {
	return c.campaignCall(ctx, http.MethodPost, nil, "v1", "campaigns", id, "cancel")
}

func (c *Client) campaignCall(ctx context.Context, method string, in any, segments ...string) (*Campaign, error) {
	var cp Campaign
	if err := c.call(ctx, method, in, &cp, segments...); err != nil {
		return nil, err
	}
	return &cp, nil
}
