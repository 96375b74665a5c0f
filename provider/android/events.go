package android

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strconv"
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

// end ends the phone's stream on this node, whose device was replaced.
func (st *streams) end(phoneID string) {
	st.mu.Lock()
	if c := st.phones[phoneID]; c != nil {
		close(c.end)
		delete(st.phones, phoneID)
	}
	st.mu.Unlock()
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
// MessageEnqueued whenever a message waits for the device, and
// MessageCancelled for each message it holds whose cancel is asked (once a
// stream, until the device confirms it), with a comment
// every keepAlive to keep proxies and the phone's connection awake. Each
// beat also records the device as seen (so the phone stays online while the
// stream is open; a write at most every touchGap, whatever else the device
// asks), ends the stream once the device is no longer the phone's (found
// when last-seen is written; at once when this node pairs another), and
// every other beat looks for work whose wake-up was lost. A newer stream of
// the phone on this node ends this one, and so does a tenant that may no
// longer use its phones (suspended, its trial ended).
//
// Over HTTP/1.1 the stream leaves the server's request handling once its
// headers and first comments are out: the connection is hijacked and
// served by a goroutine of its own (see eventStream.serve), so that what an
// open stream holds is that goroutine, the connection and its state, not
// the request's goroutine, buffers and its watcher of the connection,
// which were most of a phone's memory on the server. A device that closes
// its stream is then noticed at the next beat. Over HTTP/2 (no hijacking)
// the handler serves it.
func (s *Server) events(w http.ResponseWriter, r *http.Request, ph *sb.Phone) error {
	rc := http.NewResponseController(w)
	// The server's read and write timeouts are for ordinary requests.
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	own := r.ProtoMajor == 1 && r.ProtoMinor >= 1
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	if own {
		h.Set("Connection", "close") // the stream's end closes it
	}
	w.WriteHeader(http.StatusOK)
	stream := s.streams.add(ph.ID, ph.TenantID)
	ctx := r.Context()
	s.cfg.Log.Info("device connected", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", ph.Device.ID)
	out := streamOut(&handlerOut{w: w, rc: rc})
	defer func() {
		if out != nil { // not handed to a goroutine of its own
			s.streamEnded(ph, stream, nil)
		}
	}()

	if !out.send(": connected\n\n") {
		return nil
	}
	// Settings or webhooks that changed since the device last fetched them
	// (or that it never fetched since it paired): the app fetches them
	// again when told.
	if settings, hooks, err := s.cfg.Store.DeviceConfig(ctx, ph.ID, ph.Device.ID); err == nil {
		if settings != hashJSON(s.Settings()) && !out.send("event: SettingsUpdated\ndata: {}\n\n") {
			return nil
		}
		if hooks != hashJSON(s.webhooks(r, ph)) && !out.send("event: WebhooksUpdated\ndata: {}\n\n") {
			return nil
		}
	}
	st := &eventStream{s: s, ph: ph, stream: stream}
	st.share(ctx)
	if st.waiting(ctx) {
		// Not blocking: a wake-up may be pending already (one that came
		// since the stream was added), and it says the same.
		select {
		case stream.wake <- struct{}{}:
		default:
		}
	}
	if own && s.detach() {
		if conn, _, err := rc.Hijack(); err != nil {
			s.detached.Done()
		} else {
			out = nil
			s.track(conn, true)
			go func() {
				defer s.detached.Done()
				defer s.track(conn, false)
				o := &connOut{conn: conn, closing: s.closing}
				defer o.close()
				st.serve(context.WithoutCancel(ctx), o)
				s.streamEnded(ph, stream, st.others)
			}()
			return nil
		}
	}
	st.serve(ctx, out)
	s.streamEnded(ph, stream, st.others)
	out = nil
	return nil
}

// streamEnded forgets a stream that ended.
func (s *Server) streamEnded(ph *sb.Phone, stream *stream, others []string) {
	s.streams.unshare(ph.ID, others)
	s.streams.remove(ph.ID, stream)
	s.cfg.Log.Info("device disconnected", "tenant_id", ph.TenantID, "phone_id", ph.ID, "device_id", ph.Device.ID)
}

// streamOut is where a stream's events go: the response (handlerOut) or
// the hijacked connection (connOut).
type streamOut interface {
	// send writes chunk and flushes it; false when the device is gone.
	send(chunk string) bool
	// gone reports whether the device closed the stream (the handler's
	// context says so on its own).
	gone() bool
}

type handlerOut struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (o *handlerOut) send(chunk string) bool {
	if _, err := o.w.Write([]byte(chunk)); err != nil {
		return false
	}
	return o.rc.Flush() == nil
}

func (o *handlerOut) gone() bool { return false }

// connOut writes a stream's events to its hijacked HTTP/1.1 connection, in
// the chunks of the chunked transfer coding the server began the response
// with, and ends it with the last chunk.
type connOut struct {
	conn net.Conn
	// closing is the server's: once closed, nothing more is written but
	// the last chunk (Shutdown cuts a write in progress short).
	closing <-chan struct{}
	buf     []byte
	one     [1]byte
}

// streamWriteTimeout bounds a write to a hijacked stream: a device that
// stopped reading is let go.
const streamWriteTimeout = time.Minute

func (o *connOut) send(chunk string) bool {
	o.buf = strconv.AppendInt(o.buf[:0], int64(len(chunk)), 16)
	o.buf = append(append(append(o.buf, "\r\n"...), chunk...), "\r\n"...)
	o.conn.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	// After the deadline is set: a Shutdown that comes later sets its own.
	select {
	case <-o.closing:
		return false
	default:
	}
	_, err := o.conn.Write(o.buf)
	if cap(o.buf) > 256 {
		o.buf = nil
	}
	return err == nil
}

// gone reads what the device sent since the stream began, waiting a
// moment: nothing (the read times out) means it is still there; the end
// of its side of the connection, or an error, that it is gone. A device
// sends nothing on its stream.
func (o *connOut) gone() bool {
	o.conn.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := o.conn.Read(o.one[:])
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func (o *connOut) close() {
	o.conn.SetWriteDeadline(time.Now().Add(time.Second))
	o.conn.Write([]byte("0\r\n\r\n"))
	o.conn.Close()
}

// eventStream is an open stream's state.
type eventStream struct {
	s      *Server
	ph     *sb.Phone
	stream *stream
	// phones are those the device speaks for; others the ids of all but
	// the first, whose wake-ups come to this stream.
	phones []*sb.Phone
	others []string
	// announced holds the messages this stream said MessageCancelled for
	// that the device has not confirmed yet (nil while there are none).
	announced map[string]bool
}

// cancels says MessageCancelled {"messageId"} for each message the device
// holds whose cancel it has not confirmed, once a stream: when woken, at
// its start (DeviceWorkWaiting counts such messages, so again after a
// reconnect) and whenever a cancel is asked. False when the device is
// gone.
func (e *eventStream) cancels(ctx context.Context, out streamOut) bool {
	ids, err := e.s.cfg.Store.DeviceCancels(ctx, e.ph.Device.ID)
	if err != nil {
		return true // the next wake-up or beat tries again
	}
	var now map[string]bool
	for _, id := range ids {
		if now == nil {
			now = make(map[string]bool, len(ids))
		}
		now[id] = true
		if e.announced[id] {
			continue
		}
		data, _ := json.Marshal(messageCancelled{MessageID: id})
		if !out.send("event: " + eventMessageCancelled + "\ndata: " + string(data) + "\n\n") {
			return false
		}
		e.s.metrics.cancels.Inc()
	}
	e.announced = now
	return true
}

// eventMessageCancelled is the app's event (ExternalEventType) that asks it
// to cancel a message it holds, if it is still Pending there
// (EventsReceiver: MessagesService.cancelMessage); the app then reports it
// Cancelled. Apps before 1.67 do not know it.
const eventMessageCancelled = "MessageCancelled"

// messageCancelled is the data of MessageCancelled (the app's
// MessageCancelledEvent.Payload).
type messageCancelled struct {
	MessageID string `json:"messageId"`
}

// share makes the wake-ups of the phones of the device's other SIMs come
// to this stream; again every 20 beats, for a SIM's phone added since.
func (e *eventStream) share(ctx context.Context) {
	if all, err := e.s.devicePhones(ctx, e.ph); err == nil {
		e.phones = all
	} else if e.phones == nil {
		e.phones = []*sb.Phone{e.ph}
	}
	e.s.streams.unshare(e.ph.ID, e.others)
	e.others = e.others[:0]
	for _, p := range e.phones[1:] {
		e.others = append(e.others, p.ID)
	}
	e.s.streams.share(e.ph.ID, e.others)
}

// waiting reports whether a message waits for the device.
func (e *eventStream) waiting(ctx context.Context) bool {
	for _, p := range e.phones {
		if busy, err := e.s.cfg.Store.DeviceWorkWaiting(ctx, p.ID, e.ph.Device.ID, e.s.cfg.Now().UTC()); err == nil && busy {
			return true
		}
	}
	return false
}

// serve runs the stream until it ends.
func (e *eventStream) serve(ctx context.Context, out streamOut) {
	s, ph, stream := e.s, e.ph, e.stream
	beat := time.NewTicker(s.keepAlive)
	defer beat.Stop()
	for n := 0; ; {
		select {
		case <-ctx.Done():
			return
		case <-s.closing:
			return
		case <-stream.end: // a newer stream of the phone took over
			return
		case <-stream.check:
			if s.access(ctx, ph) != nil {
				return // the tenant was suspended
			}
		case <-stream.wake:
			if !e.cancels(ctx, out) || !out.send("event: MessageEnqueued\ndata: {}\n\n") {
				return
			}
		case <-beat.C:
			n++
			if out.gone() {
				return
			}
			if err := s.access(ctx, ph); err != nil {
				return // the tenant was suspended, or its trial ended
			}
			if err := s.seen(ctx, ph, s.touchGap); err != nil {
				return // the device was replaced or its phone deleted
			}
			if !out.send(": keep-alive\n\n") {
				return
			}
			if n%20 == 0 {
				e.share(ctx)
			}
			if n%2 == 0 && e.waiting(ctx) {
				select {
				case stream.wake <- struct{}{}:
				default:
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
