package android_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/internal/dbtest"
	"github.com/switchboard/switchboard/provider/android"
	"github.com/switchboard/switchboard/provider/android/agent"
	"github.com/switchboard/switchboard/sqlstore"
)

// campaignTo launches a live campaign of the tenant to numbers and stores
// all its messages, as the campaign runner does; it returns the campaign
// and its messages' ids.
func campaignTo(t *testing.T, db *sqlstore.DB, tenantID string, numbers ...string) (*sb.Campaign, []string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Microsecond)
	c := &sb.Campaign{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, Name: "sale", Body: "sale", Channel: sb.ChannelSMS,
		Audience: sb.AudienceTo, Recipients: numbers, Status: sb.CampaignDraft, Total: len(numbers), CreatedAt: now}
	if err := db.CreateCampaign(ctx, c, 100); err != nil {
		t.Fatal(err)
	}
	c, err := db.LaunchCampaign(ctx, tenantID, sb.Live, c.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	ch := &sb.CampaignChunk{Campaign: c, Last: true, Now: now, NewContactLimit: 1000}
	var ids []string
	for _, n := range numbers {
		m := &sb.Message{ID: sb.NewID(), TenantID: tenantID, Env: sb.Live, Direction: sb.Outbound, To: n,
			Body: "sale", Channel: sb.ChannelSMS, Status: sb.StatusQueued, CampaignID: c.ID, CreatedAt: now}
		ch.Recipients = append(ch.Recipients, sb.CampaignRecipient{Message: m})
		ids = append(ids, m.ID)
	}
	if res, err := db.StoreChunk(ctx, ch); err != nil || res.Done != len(numbers) {
		t.Fatalf("StoreChunk: %+v %v", res, err)
	}
	return c, ids
}

// cancelCampaign cancels c and withdraws its messages, as the runner does.
func cancelCampaign(t *testing.T, db *sqlstore.DB, c *sb.Campaign) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	if _, err := db.CancelCampaign(ctx, c.TenantID, sb.Live, c.ID, now); err != nil {
		t.Fatal(err)
	}
	for {
		n, err := db.WithdrawCampaign(ctx, c, now, 100)
		if err != nil {
			t.Fatal(err)
		}
		if n < 100 {
			return
		}
	}
}

func messageOf(t *testing.T, db *sqlstore.DB, tenantID, id string) *sb.Message {
	t.Helper()
	m, err := db.Message(context.Background(), tenantID, sb.Live, id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCancelReachesDevice: a campaign canceled while the reference device
// holds its messages Pending (paused), on PostgreSQL by another node,
// reaches it as MessageCancelled on its event stream; it cancels them and reports Cancelled, and they become
// canceled. A device that lost them (a fresh install of the same pairing)
// learns of the cancel when it pulls: they are handed in state Cancelling,
// and it reports them Cancelled at once, as the app does.
func TestCancelReachesDevice(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		db := openStore(t, url)
		tenantID, _, code := livePhone(t, db)
		srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: time.Minute}})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { srv.Shutdown(); ts.Close() })

		var mu sync.Mutex
		var events, canceled []string
		opt := agent.Options{URL: ts.URL + android.Prefix,
			OnEvent:  func(name string, _ time.Time) { mu.Lock(); events = append(events, name); mu.Unlock() },
			OnCancel: func(id string) { mu.Lock(); canceled = append(canceled, id); mu.Unlock() }}
		a, err := agent.Pair(context.Background(), opt, code)
		if err != nil {
			t.Fatal(err)
		}
		a.SetPaused(context.Background(), true)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		t.Cleanup(func() { stop(); <-done })

		c, ids := campaignTo(t, db, tenantID, "+15005550401", "+15005550402")
		waitFor(t, "the device to hold both messages", func() bool { return len(a.Held()) == 2 })
		// On PostgreSQL the campaign is canceled by another node: the
		// device's stream hears of it through the database (LISTEN/NOTIFY),
		// well before its beat would look (every other beat: 30 s).
		canceler, within := db, 30*time.Second
		if strings.HasPrefix(url, "postgres") {
			listening := make(chan struct{})
			var once sync.Once
			lctx, stopListen := context.WithCancel(context.Background())
			go db.Listen(lctx, func(sqlstore.Invalidation) { once.Do(func() { close(listening) }) })
			t.Cleanup(stopListen)
			<-listening
			canceler, within = openStore(t, url), 20*time.Second
		}
		cancelCampaign(t, canceler, c)
		deadline := time.Now().Add(within)
		for _, id := range ids {
			for messageOf(t, db, tenantID, id).Status != sb.StatusFailed {
				if time.Now().After(deadline) {
					t.Fatalf("the cancel of %s was not confirmed within %v", id, within)
				}
				time.Sleep(5 * time.Millisecond)
			}
			if m := messageOf(t, db, tenantID, id); m.ErrorCode != sb.ErrorCodeCampaignCanceled || m.FailureReason != sb.CanceledOnPhoneReason {
				t.Errorf("%s: %s %q", id, m.ErrorCode, m.FailureReason)
			}
			if st := a.State(id); st != "Cancelled" {
				t.Errorf("%s on the phone: %q", id, st)
			}
		}
		mu.Lock()
		slices.Sort(canceled)
		got := slices.Clone(canceled)
		heard := slices.Contains(events, "MessageCancelled")
		mu.Unlock()
		want := slices.Sorted(slices.Values(ids))
		if !slices.Equal(got, want) || !heard {
			t.Errorf("the agent canceled %v (MessageCancelled heard: %v), want %v", got, heard, want)
		}
		// Nothing goes to the radio once it is unpaused.
		a.SetPaused(context.Background(), false)
		for _, id := range ids {
			if a.SentCount(id) != 0 {
				t.Errorf("%s sent after its cancel", id)
			}
		}

		// The same pairing on a phone that lost its messages.
		c2, ids2 := campaignTo(t, db, tenantID, "+15005550403")
		a.SetPaused(context.Background(), true)
		waitFor(t, "the device to hold the message", func() bool { _, ok := a.Held()[ids2[0]]; return ok })
		stop()
		<-done
		cancelCampaign(t, db, c2)
		b := agent.New(agent.Options{URL: opt.URL}, a.ID, a.Token)
		ctx2, stop2 := context.WithCancel(context.Background())
		done2 := make(chan struct{})
		go func() { b.Run(ctx2); close(done2) }()
		defer func() { stop2(); <-done2 }()
		waitFor(t, "the cancel of a message the device lost", func() bool {
			return messageOf(t, db, tenantID, ids2[0]).Status == sb.StatusFailed
		})
		if m := messageOf(t, db, tenantID, ids2[0]); m.ErrorCode != sb.ErrorCodeCampaignCanceled || b.SentCount(ids2[0]) != 0 {
			t.Errorf("lost, then canceled: %s, sent %d times", m.ErrorCode, b.SentCount(ids2[0]))
		}
	})
}

// streamHead opens the device's event stream and returns the events it
// sends before its first keep-alive (what it sends as it opens), each as
// "name data".
func streamHead(t *testing.T, base, token string) []string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+android.Prefix+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []string
	sc := bufio.NewScanner(res.Body)
	event, data := "", ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": keep-alive":
			return out
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			out = append(out, event+" "+data)
			event, data = "", ""
		}
	}
	t.Fatalf("the stream ended before its first keep-alive: %v", sc.Err())
	return nil
}

// TestCancelResentOnReconnect: the stream of a device that holds a message
// whose cancel it has not confirmed says MessageCancelled with the app's
// payload {"messageId"} each time it opens, and GET /message hands the
// message in state Cancelling; once the device reports it Cancelled,
// neither does any more. A message the device reported Processed is never
// asked.
func TestCancelResentOnReconnect(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, url string) {
		db := openStore(t, url)
		tenantID, _, code := livePhone(t, db)
		// A beat every 200 ms: the head of a stream ends soon.
		srv := android.New(android.Config{Store: db, Routing: sb.Routing{OfflineAfter: 600 * time.Millisecond}})
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { srv.Shutdown(); ts.Close() })
		token := pairToken(t, srv, code)
		call := func(method, path, body string) *http.Response {
			req, _ := http.NewRequest(method, ts.URL+android.Prefix+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { res.Body.Close() })
			return res
		}
		take := func() map[string]string {
			var msgs []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			}
			if err := json.NewDecoder(call("GET", "/message", "").Body).Decode(&msgs); err != nil {
				t.Fatal(err)
			}
			out := map[string]string{}
			for _, m := range msgs {
				out[m.ID] = m.State
			}
			return out
		}
		c, ids := campaignTo(t, db, tenantID, "+15005550411", "+15005550412")
		pending, processed := ids[0], ids[1]
		if got := take(); got[pending] != "Pending" || got[processed] != "Pending" {
			t.Fatalf("handed: %v", got)
		}
		if res := call("PATCH", "/message", `[{"id":"`+processed+`","state":"Processed","recipients":[],"states":{}}]`); res.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH: %d", res.StatusCode)
		}
		cancelCampaign(t, db, c)
		want := "MessageCancelled " + `{"messageId":"` + pending + `"}`
		for i := range 2 {
			if head := streamHead(t, ts.URL, token); !slices.Contains(head, want) || slices.ContainsFunc(head, func(e string) bool {
				return strings.Contains(e, processed)
			}) {
				t.Fatalf("stream %d opens with %q, want %q and nothing of %s", i+1, head, want, processed)
			}
		}
		if got := take(); got[pending] != "Cancelling" || len(got) != 1 {
			t.Fatalf("handed after the cancel: %v, want %s Cancelling", got, pending)
		}
		// The app's report of a canceled message (SendStateWorker).
		call("PATCH", "/message", `[{"id":"`+pending+`","state":"Cancelled","recipients":[{"phoneNumber":"+15005550411","state":"Cancelled"}],`+
			`"states":{"Pending":"2026-11-27T10:00:00.000+00:00","Cancelled":"2026-11-27T10:00:01.000+00:00"}}]`)
		if m := messageOf(t, db, tenantID, pending); m.Status != sb.StatusFailed || m.ErrorCode != sb.ErrorCodeCampaignCanceled {
			t.Fatalf("after Cancelled: %s %s", m.Status, m.ErrorCode)
		}
		if head := streamHead(t, ts.URL, token); slices.ContainsFunc(head, func(e string) bool { return strings.HasPrefix(e, "MessageCancelled") }) {
			t.Errorf("after the confirmation the stream opens with %q", head)
		}
		if got := take(); len(got) != 0 {
			t.Errorf("handed after the confirmation: %v", got)
		}
		if m := messageOf(t, db, tenantID, processed); m.Status != sb.StatusSent {
			t.Errorf("processed: %s, want sent", m.Status)
		}
	})
}

// wakingStore wakes the phone's stream while it opens (in DeviceConfig,
// which the stream asks after it is registered): a wake-up that comes
// while the stream is opening.
type wakingStore struct{ *sqlstore.DB }

func (s wakingStore) DeviceConfig(ctx context.Context, phoneID, deviceID string) (string, string, error) {
	s.PhoneWork(ctx, phoneID)
	return s.DB.DeviceConfig(ctx, phoneID, deviceID)
}

// TestStreamWokenWhileOpening: a stream woken while it opens, with work
// waiting, still says MessageEnqueued (its own wake-up at the start must
// not block behind the pending one).
func TestStreamWokenWhileOpening(t *testing.T) {
	db := openStore(t, dbtest.SQLite(t))
	tenantID, _, code := livePhone(t, db)
	srv := android.New(android.Config{Store: wakingStore{db}, Routing: sb.Routing{OfflineAfter: time.Minute}})
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		srv.Shutdown()
		if t.Failed() { // a stuck handler would hold Close for good
			ts.CloseClientConnections()
			return
		}
		ts.Close()
	})
	token := pairToken(t, srv, code)
	campaignTo(t, db, tenantID, "+15005550421") // a message waits for the device
	req, _ := http.NewRequest("GET", ts.URL+android.Prefix+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	enqueued := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if sc.Text() == "event: MessageEnqueued" {
				enqueued <- true
				return
			}
		}
		enqueued <- false
	}()
	select {
	case ok := <-enqueued:
		if !ok {
			t.Fatal("the stream ended without MessageEnqueued")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no MessageEnqueued: the stream is stuck")
	}
	res.Body.Close()
}
