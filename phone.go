package switchboard

import "time"

// Phone states and channels.
const (
	PhoneOnline  = "online"
	PhoneOffline = "offline"

	ChannelSMS  = "sms"
	ChannelChat = "chat"
	ChannelAuto = "auto"
)

// Phone is one of a tenant's sending numbers. DailyLimit 0 means no limit.
type Phone struct {
	ID         string
	TenantID   string
	Number     string
	DailyLimit int
	Channels   []string
	Status     string
	CreatedAt  time.Time
}

// HasChannel reports whether the phone can send on channel.
func (p *Phone) HasChannel(channel string) bool {
	for _, c := range p.Channels {
		if c == channel {
			return true
		}
	}
	return false
}
