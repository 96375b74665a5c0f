package bench

// The campaign scenario of `switchboard bench`: a 100,000-recipient campaign
// against the direct sends of two tenants. It reports the launch latency,
// the rate at which the campaign's messages are created (against the
// server's direct-send rate, measured in the same run), and the latency and
// delivery delay of direct sends while the campaign runs, against the same
// load without a campaign.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard/switchboard/bench/loadgen"
	"github.com/switchboard/switchboard/phonenum"
)

// Figures of the campaign scenario.
const (
	benchCampaignRecipients = 100_000
	// benchCampaignSendRate is the rate of direct sends (single sends, open
	// loop) of each of the two tenants during both measured phases.
	benchCampaignSendRate     = 100
	benchCampaignLaunchTarget = time.Second
	benchCampaignP99Target    = 50 * time.Millisecond
	benchCampaignDelayTarget  = time.Second
)

// benchCampaignZones are number patterns (X: digits from a counter) of one
// time zone each; the bench uses one that is outside quiet hours for the
// next two hours, so that the campaign's messages are due at once.
var benchCampaignZones = []string{
	"+44207XXXXXXX", // London
	"+12122XXXXXX",  // New York
	"+12132XXXXXX",  // Los Angeles
	"+18082XXXXXX",  // Honolulu
	"+813XXXXXXXX",  // Tokyo
	"+6129XXXXXXX",  // Sydney
	"+9198XXXXXXXX", // India
}

// benchCampaignNumbers returns n distinct numbers of a zone that is out of
// quiet hours now and for the next two hours.
func benchCampaignNumbers(n int) ([]string, error) {
	now := time.Now()
	for _, z := range benchCampaignZones {
		fill := func(i int) string {
			digits := fmt.Sprintf("%0*d", strings.Count(z, "X"), i)
			var b strings.Builder
			k := 0
			for _, c := range z {
				if c == 'X' {
					b.WriteByte(digits[k])
					k++
				} else {
					b.WriteRune(c)
				}
			}
			return b.String()
		}
		probe := fill(n / 2)
		awake := true
		for d := time.Duration(0); d <= 2*time.Hour; d += 10 * time.Minute {
			if _, q := phonenum.QuietUntil(probe, now.Add(d)); q {
				awake = false
			}
		}
		if !awake {
			continue
		}
		out := make([]string, n)
		for i := range out {
			out[i] = fill(i)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no zone is out of quiet hours for the next two hours")
}

// benchCampaignRun measures the campaign scenario against the server at
// env.serverURL.
func benchCampaignRun(ctx context.Context, env *benchEnv, o benchOptions, stdout io.Writer) error {
	b := &benchCampaign{env: env, client: &http.Client{Timeout: 60 * time.Second}}
	var err error
	if b.campaign, err = env.createTenant(ctx, "bench campaign", "scale"); err != nil {
		return err
	}
	if b.other, err = env.createTenant(ctx, "bench other", "scale"); err != nil {
		return err
	}
	numbers, err := benchCampaignNumbers(benchCampaignRecipients)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(env.stderr, "campaign: "+format+"\n", args...) }
	rep := benchCampaignReport{Database: env.dbLabel, Recipients: benchCampaignRecipients, SendRate: benchCampaignSendRate}

	// Contacts, by CSV import.
	csv := "phone\n" + strings.Join(numbers, "\n") + "\n"
	start := time.Now()
	var imp struct {
		Created int `json:"created"`
	}
	if err := b.call(ctx, "POST", "/v1/contacts/import", b.campaign.LiveKey, "text/csv", []byte(csv), http.StatusOK, &imp); err != nil {
		return err
	}
	if imp.Created != benchCampaignRecipients {
		return fmt.Errorf("import created %d contacts, want %d", imp.Created, benchCampaignRecipients)
	}
	rep.ImportSeconds = time.Since(start).Seconds()
	say("imported %d contacts in %.1fs", imp.Created, rep.ImportSeconds)

	// Direct sends without a campaign.
	phase := max(o.duration, 2*time.Second)
	say("direct sends without a campaign (%v at %d/s per tenant)", phase, benchCampaignSendRate)
	quiet, err := b.directPhase(ctx, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-time.After(phase):
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.Baseline = quiet

	// The direct-send rate: closed loop, as many as the server takes.
	say("direct-send rate (closed loop, %d connections, %v)", o.connections, min(phase, 5*time.Second))
	hdr := http.Header{"Authorization": {"Bearer " + b.other.LiveKey}, "Content-Type": {"application/json"}}
	body := []byte(`{"to": "+15005550000", "body": "rate"}`)
	res, err := loadgen.Run(ctx, loadgen.Target{Name: "direct sends", Expect: func(s int) bool { return s == http.StatusAccepted },
		Next: func(int, uint64) loadgen.Request {
			return loadgen.Request{Method: "POST", URL: env.serverURL + "/v1/messages", Header: hdr, Body: body}
		}}, loadgen.Options{Connections: o.connections, Duration: min(phase, 5*time.Second), Warmup: o.warmup})
	if err != nil {
		return err
	}
	if res.Errors > 0 {
		return fmt.Errorf("direct sends: %d errors %v", res.Errors, res.Unexpected)
	}
	rep.DirectRate = res.RPS
	if err := b.drain(ctx); err != nil {
		return err
	}

	// The campaign, with the same direct sends beside it.
	var c struct {
		ID string `json:"id"`
	}
	if err := b.call(ctx, "POST", "/v1/campaigns", b.campaign.LiveKey, "application/json",
		[]byte(`{"name": "bench", "body": "Spring sale: 20% off everything", "all_contacts": true}`), http.StatusCreated, &c); err != nil {
		return err
	}
	say("launching a campaign to %d contacts, with direct sends beside it", benchCampaignRecipients)
	loud, err := b.directPhase(ctx, func(ctx context.Context) error {
		start := time.Now()
		if err := b.call(ctx, "POST", "/v1/campaigns/"+c.ID+"/launch", b.campaign.LiveKey, "", nil, http.StatusAccepted, nil); err != nil {
			return err
		}
		rep.LaunchMillis = millis(time.Since(start))
		expanded := false
		for {
			var got struct {
				Status string         `json:"status"`
				Counts map[string]int `json:"counts"`
			}
			if err := b.call(ctx, "GET", "/v1/campaigns/"+c.ID, b.campaign.LiveKey, "", nil, http.StatusOK, &got); err != nil {
				return err
			}
			if !expanded && got.Counts["pending"] == 0 {
				expanded = true
				rep.CreateSeconds = time.Since(start).Seconds()
				say("messages created in %.1fs", rep.CreateSeconds)
			}
			if got.Status == "completed" {
				rep.CompleteSeconds = time.Since(start).Seconds()
				if got.Counts["delivered"] != benchCampaignRecipients {
					return fmt.Errorf("campaign completed with counts %v", got.Counts)
				}
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(250 * time.Millisecond):
			}
		}
	})
	if err != nil {
		return err
	}
	rep.During = loud
	rep.CreateRate = float64(benchCampaignRecipients) / rep.CreateSeconds
	rep.DeliverRate = float64(benchCampaignRecipients) / rep.CompleteSeconds
	rep.verdicts()
	if o.json {
		line, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s\n", line); err != nil {
			return err
		}
	} else if _, err := io.WriteString(stdout, rep.text()); err != nil {
		return err
	}
	// As in the other scenarios, a server that fails requests must not
	// produce a good figure: more than 0.1% errors fail the command.
	for _, d := range append(rep.Baseline[:], rep.During[:]...) {
		if d.Errors*1000 > d.Requests {
			return fmt.Errorf("bench: %d of %d direct sends failed", d.Errors, d.Requests)
		}
	}
	return nil
}

type benchCampaign struct {
	env             *benchEnv
	client          *http.Client
	campaign, other benchTenant
}

// call sends one request and decodes the data of the answer into out.
func (b *benchCampaign) call(ctx context.Context, method, path, key, ctype string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, b.env.serverURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, &struct {
		Data any `json:"data"`
	}{Data: out})
}

// drain waits until no direct send of either tenant is queued or sent.
func (b *benchCampaign) drain(ctx context.Context) error {
	for _, key := range []string{b.other.LiveKey, b.campaign.LiveKey} {
		for _, status := range []string{"queued", "sent"} {
			for {
				var page []json.RawMessage
				if err := b.call(ctx, "GET", "/v1/messages?limit=1&status="+status, key, "", nil, http.StatusOK, &page); err != nil {
					return err
				}
				if len(page) == 0 {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	return nil
}

// benchDirect is what one tenant's direct sends saw during a phase.
type benchDirect struct {
	Requests  uint64  `json:"requests"`
	Errors    uint64  `json:"errors"`
	P50Millis float64 `json:"p50_ms"`
	P99Millis float64 `json:"p99_ms"`
	MaxMillis float64 `json:"max_ms"`
	// Delays from created_at to delivered_at of sampled sends.
	Sampled        int     `json:"delivery_sampled"`
	DelayP99Millis float64 `json:"delivery_delay_p99_ms"`
	DelayMaxMillis float64 `json:"delivery_delay_max_ms"`
}

// directPhase runs open-loop direct sends of both tenants (other first,
// campaign tenant second) at benchCampaignSendRate each until during
// returns, sampling the delivery delay of ten sends a second per tenant.
func (b *benchCampaign) directPhase(ctx context.Context, during func(ctx context.Context) error) ([2]benchDirect, error) {
	var out [2]benchDirect
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	results := make([]loadgen.Result, 2)
	samples := make([][]string, 2)
	errs := make([]error, 4)
	for i, key := range []string{b.other.LiveKey, b.campaign.LiveKey} {
		hdr := http.Header{"Authorization": {"Bearer " + key}, "Content-Type": {"application/json"}}
		body := []byte(`{"to": "+15005550004", "body": "direct"}`)
		wg.Go(func() {
			results[i], errs[i] = loadgen.Run(pctx, loadgen.Target{Name: "direct", Expect: func(s int) bool { return s == http.StatusAccepted },
				Next: func(int, uint64) loadgen.Request {
					return loadgen.Request{Method: "POST", URL: b.env.serverURL + "/v1/messages", Header: hdr, Body: body}
				}}, loadgen.Options{Connections: 16, Duration: time.Hour, Rate: benchCampaignSendRate})
		})
		wg.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-pctx.Done():
					return
				case <-tick.C:
				}
				var m struct {
					ID string `json:"message_id"`
				}
				if err := b.call(pctx, "POST", "/v1/messages", key, "application/json", []byte(`{"to": "+15005550000", "body": "probe"}`),
					http.StatusAccepted, &m); err != nil {
					if pctx.Err() == nil {
						errs[2+i] = err
					}
					return
				}
				samples[i] = append(samples[i], m.ID)
			}
		})
	}
	err := during(pctx)
	stop()
	wg.Wait()
	for _, e := range append([]error{err}, errs...) {
		if e != nil && e != context.Canceled {
			return out, e
		}
	}
	for i, key := range []string{b.other.LiveKey, b.campaign.LiveKey} {
		r := results[i]
		out[i] = benchDirect{Requests: r.Requests, Errors: r.Errors, P50Millis: millis(r.P50), P99Millis: millis(r.P99), MaxMillis: millis(r.Max)}
		var delays []time.Duration
		for _, id := range samples[i] {
			var m struct {
				Status      string    `json:"status"`
				CreatedAt   time.Time `json:"created_at"`
				DeliveredAt time.Time `json:"delivered_at"`
			}
			for {
				if err := b.call(ctx, "GET", "/v1/messages/"+id, key, "", nil, http.StatusOK, &m); err != nil {
					return out, err
				}
				if m.Status == "delivered" {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			delays = append(delays, m.DeliveredAt.Sub(m.CreatedAt))
		}
		slices.Sort(delays)
		if n := len(delays); n > 0 {
			out[i].Sampled = n
			out[i].DelayP99Millis = millis(delays[min(n-1, n*99/100)])
			out[i].DelayMaxMillis = millis(delays[n-1])
		}
	}
	return out, nil
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchCampaignReport is the scenario's report, also its --json line.
type benchCampaignReport struct {
	Scenario        string  `json:"scenario"`
	Database        string  `json:"database"`
	Recipients      int     `json:"recipients"`
	SendRate        int     `json:"direct_send_rate_per_tenant"`
	ImportSeconds   float64 `json:"import_s"`
	DirectRate      float64 `json:"direct_sends_per_s"`
	LaunchMillis    float64 `json:"launch_ms"`
	CreateSeconds   float64 `json:"create_s"`
	CreateRate      float64 `json:"created_per_s"`
	CompleteSeconds float64 `json:"complete_s"`
	DeliverRate     float64 `json:"campaign_delivered_per_s"`
	// [other tenant, campaign tenant]
	Baseline [2]benchDirect `json:"without_campaign"`
	During   [2]benchDirect `json:"during_campaign"`
	Verdicts []string       `json:"verdicts"`
	Pass     bool           `json:"pass"`
}

func (r *benchCampaignReport) verdicts() {
	r.Scenario, r.Pass = "campaign", true
	check := func(ok bool, format string, args ...any) {
		v := "PASS"
		if !ok {
			v, r.Pass = "FAIL", false
		}
		r.Verdicts = append(r.Verdicts, fmt.Sprintf(format, args...)+": "+v)
	}
	check(r.LaunchMillis < millis(benchCampaignLaunchTarget), "launch answered 202 in %.1f ms; target < %v", r.LaunchMillis, benchCampaignLaunchTarget)
	check(r.CreateRate >= r.DirectRate, "campaign messages created at %.0f/s, %.2fx the direct-send rate of %.0f/s; target >= 1x",
		r.CreateRate, r.CreateRate/r.DirectRate, r.DirectRate)
	check(r.During[0].P99Millis < millis(benchCampaignP99Target), "another tenant's direct sends during the campaign: p99 %.1f ms (%.1f ms without); target < %v",
		r.During[0].P99Millis, r.Baseline[0].P99Millis, benchCampaignP99Target)
	for i, who := range []string{"another tenant's", "the campaign tenant's"} {
		check(r.During[i].DelayMaxMillis-r.Baseline[i].DelayMaxMillis < millis(benchCampaignDelayTarget),
			"%s direct sends delivered within %.0f ms (max; %.0f ms without the campaign); target: at most %v later",
			who, r.During[i].DelayMaxMillis, r.Baseline[i].DelayMaxMillis, benchCampaignDelayTarget)
	}
}

func (r *benchCampaignReport) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario campaign: %d contacts (CSV import %.1f s), all_contacts campaign; database %s\n", r.Recipients, r.ImportSeconds, r.Database)
	fmt.Fprintf(&b, "direct-send rate (closed loop): %.0f/s\n", r.DirectRate)
	fmt.Fprintf(&b, "launch: %.1f ms; messages created in %.1f s (%.0f/s); campaign delivered in %.1f s (%.0f/s)\n",
		r.LaunchMillis, r.CreateSeconds, r.CreateRate, r.CompleteSeconds, r.DeliverRate)
	fmt.Fprintf(&b, "direct sends, %d/s per tenant (open loop)  requests  errors  p50 ms  p99 ms  max ms  delivery p99 ms  delivery max ms\n", r.SendRate)
	for _, row := range []struct {
		name string
		d    benchDirect
	}{
		{"other tenant, no campaign", r.Baseline[0]}, {"other tenant, during campaign", r.During[0]},
		{"campaign tenant, no campaign", r.Baseline[1]}, {"campaign tenant, during campaign", r.During[1]},
	} {
		fmt.Fprintf(&b, "%-40s %9d %7d %7.1f %7.1f %7.1f %16.0f %16.0f\n", row.name, row.d.Requests, row.d.Errors,
			row.d.P50Millis, row.d.P99Millis, row.d.MaxMillis, row.d.DelayP99Millis, row.d.DelayMaxMillis)
	}
	for _, v := range r.Verdicts {
		b.WriteString(v + "\n")
	}
	return b.String()
}
