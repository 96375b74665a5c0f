// Package campaign runs launched campaigns: it expands each running campaign
// into ordinary messages (carrying the campaign's id, so delivery claims them
// only after direct sends), withdraws the unsent messages of canceled
// campaigns, and marks campaigns completed once every message is final.
//
// Expansion goes in chunks, one transaction each, and the campaign's
// progress is written in the same transaction as the chunk's messages: a
// restarted runner (or another node on the same PostgreSQL database) resumes
// where the last committed chunk ended, without duplicating or losing a
// recipient. Running campaigns take turns, one chunk each, so a large
// campaign does not hold back a small one, and chunks are small so that the
// writes of direct sends never wait long behind one.
//
// Rules are those of a direct send, except that a recipient is never refused
// for a limit: opted-out recipients are skipped, quiet hours and the daily
// new-contact and phone limits defer the message (see sqlstore.StoreChunk).
// It is not an HTTP handler and holds no state that a restart would lose.
package campaign

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/tmpl"
)

// Store is what the runner needs from storage.
type Store interface {
	ActiveCampaigns(ctx context.Context) ([]*sb.Campaign, error)
	CampaignRecipients(ctx context.Context, id string) ([]string, error)
	ContactsByID(ctx context.Context, tenantID string, env sb.Environment, ids []string) (map[string]*sb.Contact, error)
	ContactsAfter(ctx context.Context, tenantID string, env sb.Environment, after string, cutoff time.Time, limit int) ([]*sb.Contact, error)
	StoreChunk(ctx context.Context, ch *sb.CampaignChunk) (sb.ChunkResult, error)
	CompleteCampaign(ctx context.Context, c *sb.Campaign, now time.Time) (bool, error)
	WithdrawCampaign(ctx context.Context, c *sb.Campaign, now time.Time, limit int) (int, error)
	Tenant(ctx context.Context, id string) (*sb.Tenant, error)
}

// Options tune a Runner; zero values take the defaults.
type Options struct {
	// Chunk is how many recipients one transaction stores.
	Chunk int
	// Poll is how often a runner with active campaigns looks for work.
	Poll time.Duration
	// IdlePoll is how often a runner with no active campaign looks for
	// work when its store signals the campaigns launched or canceled in
	// this process (CampaignsDue): those are taken at once, and the ones
	// of other nodes within IdlePoll. Without the signal an idle runner
	// looks every Poll.
	IdlePoll time.Duration
	// Wait is how long a campaign that cannot go on (tenant suspended, no
	// phone online for a channel, chat engine down) waits before a retry.
	Wait time.Duration
	// CheckEvery is how often an expanded campaign is checked for
	// completion.
	CheckEvery time.Duration
	// Share is the part of the time the runner works while it has work:
	// after each round of turns it rests in proportion to the time the
	// round took, leaving the database and the CPU to direct sends (and to
	// the delivery of the campaign's own messages).
	Share float64
	// Registry, when set, gets the runner's metrics.
	Registry prometheus.Registerer
	// Log is the runner's logger (default slog.Default()): a campaign's
	// completion and the withdrawal of a canceled one's messages at info
	// level.
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.Chunk == 0 {
		o.Chunk = 1000
	}
	if o.Poll == 0 {
		o.Poll = 200 * time.Millisecond
	}
	if o.IdlePoll == 0 {
		o.IdlePoll = time.Second
	}
	if o.Wait == 0 {
		o.Wait = 5 * time.Second
	}
	if o.CheckEvery == 0 {
		o.CheckEvery = 500 * time.Millisecond
	}
	if o.Share <= 0 || o.Share > 1 {
		o.Share = 0.9
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Runner runs the campaigns of every tenant on one node.
type Runner struct {
	store    Store
	provider Channels
	plans    sb.Plans
	opt      Options
	now      func() time.Time

	// Per campaign id: its recipient list (lists only), when it may be
	// worked on again, the parsed template.
	lists     map[string][]string
	notBefore map[string]time.Time
	templates map[string]*tmpl.Template
	// withdrawn counts, per canceled campaign, the messages this runner
	// withdrew, for the line it logs when none is left.
	withdrawn map[string]int

	reached prometheus.Counter
	log     *slog.Logger
}

// Channels answers a campaign's questions about its recipients: the
// channel a number can receive, whether the chat engine is up, and quiet
// hours.
type Channels interface {
	Detect(ctx context.Context, tenantID string, env sb.Environment, number string) (string, error)
	ChatAvailable(ctx context.Context, tenantID string, env sb.Environment) error
	QuietUntil(number string, now time.Time) (time.Time, bool)
}

// BatchDetector is implemented by Channels that can detect the channel of
// many numbers in one request (a chat engine's batch check): a campaign
// asks for each chunk's audience at once before it detects one by one.
type BatchDetector interface {
	DetectMany(ctx context.Context, tenantID string, env sb.Environment, numbers []string)
}

// New returns a Runner.
func New(store Store, provider Channels, plans sb.Plans, opt Options) *Runner {
	opt.defaults()
	r := &Runner{store: store, provider: provider, plans: plans, opt: opt, now: time.Now, log: opt.Log,
		lists: map[string][]string{}, notBefore: map[string]time.Time{}, templates: map[string]*tmpl.Template{},
		withdrawn: map[string]int{},
		reached: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_campaign_recipients_reached_total",
			Help: "Campaign recipients this node reached: given a message (due now or deferred) or skipped (opted out, invalid).",
		})}
	if opt.Registry != nil {
		opt.Registry.MustRegister(r.reached)
	}
	return r
}

// CampaignsDue is implemented by stores that signal the campaigns
// launched or canceled in this process (sqlstore.DB).
type CampaignsDue interface {
	CampaignsDue() <-chan struct{}
}

// Run works until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	var due <-chan struct{}
	if d, ok := r.store.(CampaignsDue); ok {
		due = d.CampaignsDue()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for ctx.Err() == nil {
		start := time.Now()
		worked, active, err := r.pass(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Error("campaign runner", "err", err)
		}
		rest := r.opt.Poll
		switch {
		case worked:
			rest = time.Duration(float64(time.Since(start)) * (1 - r.opt.Share) / r.opt.Share)
		case !active && err == nil && due != nil:
			// Nothing to do until a launch or a cancel: this process's
			// wake the runner at once.
			rest = max(r.opt.IdlePoll, r.opt.Poll)
		}
		timer.Reset(rest)
		select {
		case <-ctx.Done():
		case <-due:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// pass gives every active campaign one turn: a chunk to expand, a batch to
// withdraw or a completion check. It reports whether any did work, and
// whether any is active; a campaign whose turn fails waits, and the others
// go on.
func (r *Runner) pass(ctx context.Context) (worked, anyActive bool, err error) {
	cs, err := r.store.ActiveCampaigns(ctx)
	if err != nil {
		return false, false, err
	}
	anyActive = len(cs) > 0
	active := make(map[string]bool, len(cs))
	for _, c := range cs {
		active[c.ID] = true
		if t, ok := r.notBefore[c.ID]; ok && r.now().Before(t) {
			continue
		}
		w, err := r.turn(ctx, c)
		if err != nil {
			if ctx.Err() != nil {
				return worked, anyActive, nil
			}
			r.log.Error("campaign runner", "campaign_id", c.ID, "err", err)
			r.wait(c, r.opt.Wait)
		}
		worked = worked || w
	}
	maps.DeleteFunc(r.notBefore, func(id string, _ time.Time) bool { return !active[id] })
	maps.DeleteFunc(r.lists, func(id string, _ []string) bool { return !active[id] })
	maps.DeleteFunc(r.templates, func(id string, _ *tmpl.Template) bool { return !active[id] })
	maps.DeleteFunc(r.withdrawn, func(id string, _ int) bool { return !active[id] })
	return worked, anyActive, nil
}

func (r *Runner) wait(c *sb.Campaign, d time.Duration) {
	r.notBefore[c.ID] = r.now().Add(d)
}

// withdrawBatch is how many messages of a canceled campaign one transaction
// withdraws.
const withdrawBatch = 500

func (r *Runner) turn(ctx context.Context, c *sb.Campaign) (worked bool, err error) {
	now := r.now().UTC().Truncate(time.Microsecond)
	switch {
	case c.Status == sb.CampaignCanceled:
		n, err := r.store.WithdrawCampaign(ctx, c, now, withdrawBatch)
		if err != nil {
			return false, err
		}
		r.withdrawn[c.ID] += n
		if n < withdrawBatch {
			r.log.Info("campaign canceled: its unsent messages are withdrawn", "tenant_id", c.TenantID, "environment", string(c.Env),
				"campaign_id", c.ID, "withdrawn", r.withdrawn[c.ID])
			delete(r.withdrawn, c.ID)
		}
		return n > 0, nil
	case c.Expanded:
		r.wait(c, r.opt.CheckEvery)
		done, err := r.store.CompleteCampaign(ctx, c, now)
		if done {
			r.log.Info("campaign completed", "tenant_id", c.TenantID, "environment", string(c.Env), "campaign_id", c.ID,
				"recipients", c.Total, "skipped_opted_out", c.SkippedOptedOut, "skipped_invalid", c.SkippedInvalid,
				"deferred_quiet_hours", c.DeferredQuiet, "deferred_limits", c.DeferredLimits)
		}
		return false, err
	}
	tenant, err := r.store.Tenant(ctx, c.TenantID)
	if err != nil {
		return false, err
	}
	if tenant.Access(now) != nil { // suspended, or trial over: wait
		r.wait(c, r.opt.Wait)
		return false, nil
	}
	ch, err := r.chunk(ctx, c, r.plans[tenant.Plan].NewContactsPerDay, now)
	if err != nil {
		var e *sb.Error
		if errors.As(err, &e) { // the provider cannot say now: wait
			r.log.Warn("campaign waits", "campaign_id", c.ID, "code", e.Code)
			r.wait(c, r.opt.Wait)
			return false, nil
		}
		return false, err
	}
	res, err := r.store.StoreChunk(ctx, ch)
	if err != nil {
		return false, err
	}
	r.reached.Add(float64(res.Done))
	if c.Position == 0 && res.Done > 0 {
		r.log.Info("campaign started", "tenant_id", c.TenantID, "environment", string(c.Env), "campaign_id", c.ID,
			"audience", c.Audience, "recipients", c.Total)
	}
	if res.Blocked {
		r.log.Warn("campaign waits: no online phone sends on a recipient's channel", "campaign_id", c.ID)
		r.wait(c, r.opt.Wait)
	}
	return res.Done > 0 || ch.Last, nil
}

// chunk prepares the next recipients of c: their numbers and variables,
// rendered bodies, channels and quiet hours.
func (r *Runner) chunk(ctx context.Context, c *sb.Campaign, newContactLimit int, now time.Time) (*sb.CampaignChunk, error) {
	ch := &sb.CampaignChunk{Campaign: c, NewContactLimit: newContactLimit, Now: now}
	type target struct {
		number  string
		contact *sb.Contact
		missing bool // a deleted contact
		after   string
	}
	var targets []target
	switch c.Audience {
	case sb.AudienceAllContacts:
		contacts, err := r.store.ContactsAfter(ctx, c.TenantID, c.Env, c.After, *c.LaunchedAt, r.opt.Chunk)
		if err != nil {
			return nil, err
		}
		for _, ct := range contacts {
			targets = append(targets, target{number: ct.Phone, contact: ct, after: ct.ID})
		}
		ch.Last = len(contacts) < r.opt.Chunk
	default:
		list, ok := r.lists[c.ID]
		if !ok {
			var err error
			if list, err = r.store.CampaignRecipients(ctx, c.ID); err != nil {
				return nil, err
			}
			r.lists[c.ID] = list
		}
		start := min(c.Position, len(list))
		page := list[start:min(start+r.opt.Chunk, len(list))]
		ch.Last = start+len(page) == len(list)
		if c.Audience == sb.AudienceTo {
			for _, n := range page {
				targets = append(targets, target{number: n})
			}
			break
		}
		contacts, err := r.store.ContactsByID(ctx, c.TenantID, c.Env, page)
		if err != nil {
			return nil, err
		}
		for _, id := range page {
			ct := contacts[id]
			if ct == nil {
				targets = append(targets, target{missing: true})
				continue
			}
			targets = append(targets, target{number: ct.Phone, contact: ct})
		}
	}

	var parsed *tmpl.Template
	if c.Template != "" {
		if parsed = r.templates[c.ID]; parsed == nil {
			var err error
			if parsed, err = tmpl.Parse(c.TemplateBody); err != nil {
				return nil, err
			}
			r.templates[c.ID] = parsed
		}
	}
	if c.Channel == sb.ChannelChat {
		if err := r.provider.ChatAvailable(ctx, c.TenantID, c.Env); err != nil {
			return nil, err
		}
	}
	if bd, ok := r.provider.(BatchDetector); ok && c.Channel == sb.ChannelAuto {
		// A chat engine answers for the whole chunk in one request; the
		// answers are cached, and Detect below finds them there.
		numbers := make([]string, 0, len(targets))
		for _, t := range targets {
			if !t.missing {
				numbers = append(numbers, t.number)
			}
		}
		bd.DetectMany(ctx, c.TenantID, c.Env, numbers)
	}
	ch.Recipients = make([]sb.CampaignRecipient, len(targets))
	for i, t := range targets {
		rc := &ch.Recipients[i]
		rc.After = t.after
		if t.missing {
			continue
		}
		body := c.Body
		if parsed != nil {
			var ok bool
			if body, ok = render(parsed, sb.RecipientVariables(c.Data, t.number, t.contact)); !ok {
				continue // skipped as invalid
			}
		}
		channel, err := r.channel(ctx, c, t.number)
		if err != nil {
			return nil, err
		}
		rc.Message = &sb.Message{ID: sb.NewID(), TenantID: c.TenantID, Env: c.Env, Direction: sb.Outbound, To: t.number,
			Body: body, Channel: channel, Status: sb.StatusQueued, Template: c.Template, CampaignID: c.ID, CreatedAt: now}
		if c.Channel == sb.ChannelAuto {
			// Sent by chat, it goes again by SMS if not delivered within
			// the default ttl (the store sets the deadline once it knows
			// the phone and the day).
			rc.Message.TTL = sb.ChatFallbackAfter
		}
		rc.Quiet = r.quietHours(t.number, now)
	}
	return ch, nil
}

func render(t *tmpl.Template, vars map[string]string) (string, bool) {
	body, err := t.Render(vars) // bounded to a message's length
	if err != nil || body == "" {
		return "", false
	}
	return body, true
}

// channel resolves a recipient's channel as a direct send does, except that
// when detection is unavailable for auto, the message goes by sms.
func (r *Runner) channel(ctx context.Context, c *sb.Campaign, number string) (string, error) {
	if c.Channel != sb.ChannelAuto {
		return c.Channel, nil
	}
	ch, err := r.provider.Detect(ctx, c.TenantID, c.Env, number)
	if sb.ErrorCode(err) == sb.CodeDetectionUnavailable {
		return sb.ChannelSMS, nil
	}
	return ch, err
}

// quietHours returns the recipient's quiet-hours rule, with the answer for
// now worked out ahead of the transaction that uses it.
func (r *Runner) quietHours(number string, now time.Time) func(time.Time) (time.Time, bool) {
	until, quiet := r.provider.QuietUntil(number, now)
	return func(t time.Time) (time.Time, bool) {
		if t.Equal(now) {
			return until, quiet
		}
		return r.provider.QuietUntil(number, t)
	}
}
