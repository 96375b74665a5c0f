package android

import (
	"net/http"
	"sync"
	"time"

	sb "github.com/switchboard/switchboard"
)

// streams holds the /events streams open on this node: one per phone (its
// device's), since a device holds one stream and a token that opens more
// must not hold a connection each. A new stream of the phone ends the one
// before it.
type streams struct {
	mu       sync.Mutex
	phones   map[string]*stream
	replaced int64 // streams ended by a newer stream of their phone
	// sims maps the phone of another SIM of a device to the phone whose
	// stream the device holds.
	sims map[string]string
}

// stream is one open /events stream of a phone of tenant: wake says a
// message may wait, check that the tenant's access changed, and end is
// closed when a newer stream of the phone replaces it.
type stream struct {
	tenant string
	wake   chan struct{}
	check  chan struct{}
	end    chan struct{}
}

func (st *streams) init() { st.phones, st.sims = map[string]*stream{}, map[string]string{} }

// share makes the wake-ups of the phones of a device's other SIMs wake the
// stream of phoneID, until unshare.
func (st *streams) share(phoneID string, others []string) {
	st.mu.Lock()
	for _, id := range others {
		st.sims[id] = phoneID
	}
	st.mu.Unlock()
}

func (st *streams) unshare(phoneID string, others []string) {
	st.mu.Lock()
	for _, id := range others {
		if st.sims[id] == phoneID {
			delete(st.sims, id)
		}
	}
	st.mu.Unlock()
}

// add opens the phone's stream, ending the one it had on this node.
func (st *streams) add(phoneID, tenantID string) *stream {
	c := &stream{tenant: tenantID, wake: make(chan struct{}, 1), check: make(chan struct{}, 1), end: make(chan struct{})}
	st.mu.Lock()
	if old := st.phones[phoneID]; old != nil {
		close(old.end)
		st.replaced++
	}
	st.phones[phoneID] = c
	st.mu.Unlock()
	return c
}

func (st *streams) remove(phoneID string, c *stream) {
	st.mu.Lock()
	if st.phones[phoneID] == c {
		delete(st.phones, phoneID)
	}
	st.mu.Unlock()
}

// wake signals the phone's stream held on this node; it never blocks, and
// wake-ups that come while one is pending merge into it.
func (st *streams) wake(phoneID string) {
	st.mu.Lock()
	c := st.phones[phoneID]
	if c == nil && st.sims[phoneID] != "" {
		c = st.phones[st.sims[phoneID]]
	}
	if c != nil {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	st.mu.Unlock()
}

// recheck signals the streams of the tenant's phones to check its access.
func (st *streams) recheck(tenantID string) {
	st.mu.Lock()
	for _, c := range st.phones {
		if c.tenant == tenantID {
			select {
			case c.check <- struct{}{}:
			default:
			}
		}
	}
	st.mu.Unlock()
}

// count returns how many event streams are open on this node.
func (st *streams) count() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.phones)
}

// replacedCount returns how many streams a newer one of their phone ended.
func (st *streams) replacedCount() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.replaced
}

// events is GET /events: a Server-Sent Events stream that says
// MessageEnqueued whenever a message waits for the device, with a comment
// every keepAlive to keep proxies and the phone's connection awake. Each
// beat also records the device as seen (so the phone stays online while the
// stream is open; a write at most every half beat, whatever else the
// device asks), ends the stream once the device is no longer the phone's,
// and every other beat looks for work whose wake-up was lost. A newer
// stream of the phone on this node ends this one, and so does a tenant that
// may no longer use its phones (suspended, its trial ended).
func (s *Server) events(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	rc := http.NewResponseController(w)
	// The server's read and write timeouts are for ordinary requests.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	stream := s.streams.add(ph.ID, ph.TenantID)
	defer s.streams.remove(ph.ID, stream)
	wake := stream.wake
	ctx := r.Context()
	s.cfg.Log.Info("device connected", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", ph.Device.ID)
	defer s.cfg.Log.Info("device disconnected", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", ph.Device.ID)

	send := func(chunk string) bool {
		if _, err := w.Write([]byte(chunk)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": connected\n\n") {
		return nil
	}
	// Settings or webhooks that changed since the device last fetched them
	// (or that it never fetched since it paired): the app fetches them
	// again when told.
	if settings, hooks, err := s.cfg.Store.DeviceConfig(ctx, ph.ID, ph.Device.ID); err == nil {
		if settings != hashJSON(s.Settings()) && !send("event: SettingsUpdated\ndata: {}\n\n") {
			return nil
		}
		if hooks != hashJSON(s.webhooks(r, ph)) && !send("event: WebhooksUpdated\ndata: {}\n\n") {
			return nil
		}
	}
	// The phones of the device's other SIMs are woken through this stream.
	var phones []*sb.Phone
	var others []string
	share := func() { // again every 20 beats: a SIM's phone added since
		if all, err := s.devicePhones(ctx, ph); err == nil {
			phones = all
		} else if phones == nil {
			phones = []*sb.Phone{ph}
		}
		s.streams.unshare(ph.ID, others)
		others = others[:0]
		for _, p := range phones[1:] {
			others = append(others, p.ID)
		}
		s.streams.share(ph.ID, others)
	}
	share()
	defer func() { s.streams.unshare(ph.ID, others) }()
	waiting := func() bool {
		for _, p := range phones {
			if busy, err := s.cfg.Store.DeviceWorkWaiting(ctx, p.ID, ph.Device.ID, s.cfg.Now().UTC()); err == nil && busy {
				return true
			}
		}
		return false
	}
	if waiting() {
		wake <- struct{}{}
	}
	beat := time.NewTicker(s.keepAlive)
	defer beat.Stop()
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil
		case <-stream.end: // a newer stream of the phone took over
			return nil
		case <-stream.check:
			if s.access(ctx, ph) != nil {
				return nil // the tenant was suspended
			}
		case <-wake:
			if !send("event: MessageEnqueued\ndata: {}\n\n") {
				return nil
			}
		case <-beat.C:
			n++
			if err := s.access(ctx, ph); err != nil {
				return nil // the tenant was suspended, or its trial ended
			}
			if err := s.seen(ctx, ph, s.keepAlive/2); err != nil {
				return nil // the device was replaced or its phone deleted
			}
			if !send(": keep-alive\n\n") {
				return nil
			}
			if n%20 == 0 {
				share()
			}
			if n%2 == 0 {
				if waiting() {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			}
		}
	}
}

// pacing holds the wake-ups scheduled for when a phone's per-minute rate
// lets its next message go.
type pacing struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
	done   bool
}

func (p *pacing) init() { p.timers = map[string]*time.Timer{} }

// wakeAt calls fn at t, once per phone: a wake-up already scheduled for the
// phone stands.
func (p *pacing) wakeAt(phoneID string, t time.Time, fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done || p.timers[phoneID] != nil {
		return
	}
	p.timers[phoneID] = time.AfterFunc(time.Until(t), func() {
		p.mu.Lock()
		delete(p.timers, phoneID)
		p.mu.Unlock()
		fn()
	})
}

func (p *pacing) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	for _, t := range p.timers {
		t.Stop()
	}
}
