package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sb "github.com/switchboard/switchboard"
	"github.com/switchboard/switchboard/sqlstore"
)

// TestClusterNodeKilled runs three `switchboard serve` processes on one
// PostgreSQL database with the default liveness timings (a beat every
// second, dead after three), sends from several goroutines spread over the
// three, and SIGKILLs one of them in the middle of the load. Then:
//
//   - every message that got a 202, from any node, is delivered: none lost;
//   - the killed node is declared dead, and its claimed messages and
//     webhook deliveries made due, within 5 s of the kill, by one
//     surviving node, which logs what it moved;
//   - every message's message.delivered event reaches the endpoint at least
//     once, and a repeated one carries the same delivery id (one delivery
//     per message and event: ids are stable across retries and takeovers);
//   - the duplicates are counted and consistent: the endpoint's repeated
//     receptions are no more than the deliveries the survivors redelivered
//     (switchboard_webhook_redeliveries_total), the messages the survivors
//     took over are what their log lines say, and each was handed to the
//     provider again (attempts > 1).
func TestClusterNodeKilled(t *testing.T) {
	t.Parallel()
	db := postgresURL(t)
	tn := newTenant(t, db, "--plan", "scale")

	// The endpoint records every reception: delivery id, event, message.
	type reception struct{ delivery, event, message string }
	var hookMu sync.Mutex
	var received []reception
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p sb.EventPayload
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &p)
		id := r.Header.Get("X-Service-Delivery")
		if id == "" || id != r.Header.Get("webhook-id") {
			t.Errorf("delivery headers X-Service-Delivery %q, webhook-id %q", id, r.Header.Get("webhook-id"))
		}
		hookMu.Lock()
		received = append(received, reception{id, r.Header.Get("X-Service-Event"), p.MessageID})
		hookMu.Unlock()
	}))
	defer hook.Close()

	args := []string{"--allow-private-webhooks"}
	nodes := []*process{startProcess(t, db, args...), startProcess(t, db, args...), startProcess(t, db, args...)}
	victim := nodes[0]
	victimID := nodeID(t, victim)
	s := &server{t: t, URL: nodes[1].URL}
	if r := s.do(t, "POST", "/v1/webhooks", tn.Live, map[string]any{"url": hook.URL + "/hook", "events": []string{sb.EventDelivered}, "secret": hookSecret}); r.Status != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", r.Status, r.Raw)
	}

	var mu sync.Mutex
	accepted := map[string]int{} // message id -> node that accepted it
	var dead atomic.Bool         // the victim was killed: send to the others
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				n := (w + i) % len(nodes)
				if n == 0 && dead.Load() {
					n = 1 + i%2
				}
				body := fmt.Sprintf(`{"to":"+15005550000","body":"cluster test %d/%d"}`, w, i)
				id, status, err := postSend(client, nodes[n].URL, tn.Live, body)
				if err != nil {
					continue // the killed node: its answer is lost, the send is not counted
				}
				if status == http.StatusAccepted {
					mu.Lock()
					accepted[id] = n
					mu.Unlock()
				} else if ctx.Err() == nil {
					t.Errorf("node %d answered %d", n, status)
				}
			}
		})
	}
	count := func(node int) (all, of int) {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range accepted {
			if n == node {
				of++
			}
		}
		return len(accepted), of
	}
	eventually(t, 60*time.Second, "sends accepted by every node before the kill", func() bool {
		all, ofVictim := count(0)
		return all >= 900 && ofVictim >= 300
	})

	conn, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The victim is killed while it holds claimed messages, or the test
	// would not test their takeover. Each is held for the simulator's
	// 100 ms, so on a slow machine, with few sends a second, a kill at a
	// random instant sometimes found none (seen in CI). So it is
	// stopped first (SIGSTOP: no beat, no write from then on, as dead),
	// and killed once the claims it holds stay the same for two reads of
	// the database (its last statements have landed) and are not none;
	// otherwise it goes on (SIGCONT) for more sends and is tried again.
	// killedAt is the stop, the instant it stopped working.
	var killedAt time.Time
	for try := 0; ; try++ {
		_, before := count(0)
		victim.cmd.Process.Signal(syscall.SIGSTOP)
		killedAt = time.Now()
		held := -1
		for {
			var n int
			if err := conn.QueryRow(`SELECT COUNT(*) FROM message_claims WHERE node = $1`, victimID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == held {
				break
			}
			held = n
			time.Sleep(50 * time.Millisecond) // between two reads: not a wait for an outcome
		}
		if held > 0 {
			t.Logf("the victim stopped holding %d claimed messages (try %d), then killed", held, try+1)
			break
		}
		if try == 20 {
			t.Fatal("the victim held no claimed message at any of 20 stops: the test cannot test their takeover")
		}
		victim.cmd.Process.Signal(syscall.SIGCONT)
		eventually(t, 60*time.Second, "more sends accepted by the victim", func() bool {
			_, of := count(0)
			return of >= before+20
		})
	}
	victim.kill()
	dead.Store(true)
	// The load goes on, on the two others, while they notice the death.
	before, _ := count(0)
	eventually(t, 60*time.Second, "sends accepted after the kill", func() bool {
		all, _ := count(0)
		return all >= before+300 && time.Since(killedAt) >= 2*time.Second
	})
	stop()
	wg.Wait()
	all, ofVictim := count(0)
	t.Logf("%d sends accepted (202), %d of them by the killed node", all, ofVictim)

	// Declared dead, and its work taken over, within 5 s of the kill. The
	// design bound is dead-after (3 s) plus one beat interval (1 s) after
	// the victim's last beat, itself at most 1 s before the kill: 4 s. Both
	// instants come from this host's clock (dead_at is the database's,
	// on this machine), and the takeover sets dead_at in the transaction
	// that moves the claims, so dead_at - kill is the takeover time itself.
	// The 1.5 s of tolerance is for a loaded 2-core machine, where the
	// surviving nodes' beat (a goroutine, then a query) may run late.
	const promised, tolerance = 5 * time.Second, 1500 * time.Millisecond
	var deadAt, beatAt sql.NullInt64
	var deadBy sql.NullString
	eventually(t, 30*time.Second, "the killed node declared dead", func() bool {
		err := conn.QueryRow(`SELECT dead_at, heartbeat_at, dead_by FROM nodes WHERE id = $1`, victimID).Scan(&deadAt, &beatAt, &deadBy)
		if err != nil {
			t.Fatal(err)
		}
		return deadAt.Valid
	})
	takeover := sb.FromMicros(deadAt.Int64).Sub(killedAt)
	t.Logf("killed node %s: last beat %v before the kill, declared dead %v after it by %s",
		victimID, killedAt.Sub(sb.FromMicros(beatAt.Int64)).Round(time.Millisecond), takeover.Round(time.Millisecond), deadBy.String)
	if takeover > promised+tolerance {
		t.Errorf("the killed node's work was taken over %v after its death, want within %v (+%v tolerance)", takeover, promised, tolerance)
	}

	// One survivor took it over, and logged what it moved (after its
	// transaction committed: the line may still be on its way through the
	// pipe).
	var moved struct{ Messages, Deliveries int }
	takers := 0
	logged := func() bool {
		takers = 0
		for _, p := range nodes[1:] {
			for _, line := range strings.Split(p.logs.String(), "\n") {
				var l struct {
					Msg        string `json:"msg"`
					Dead       string `json:"dead_node_id"`
					Messages   int    `json:"messages"`
					Deliveries int    `json:"webhook_deliveries"`
				}
				if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "node declared dead; its claimed work taken over" && l.Dead == victimID {
					takers++
					moved.Messages, moved.Deliveries = l.Messages, l.Deliveries
				}
			}
		}
		return takers > 0
	}
	for deadline := time.Now().Add(10 * time.Second); !logged() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if takers != 1 {
		t.Fatalf("%d survivors logged taking the killed node's work over, want 1", takers)
	}
	t.Logf("taken over: %d messages, %d webhook deliveries", moved.Messages, moved.Deliveries)
	if moved.Messages == 0 {
		t.Errorf("no message taken over: the killed node held none under load (the test did not test the takeover)")
	}

	// No loss: every accepted message delivered.
	mu.Lock()
	ids := make([]string, 0, len(accepted))
	for id := range accepted {
		ids = append(ids, id)
	}
	mu.Unlock()
	eventually(t, 60*time.Second, "every accepted message delivered", func() bool {
		var n int
		if err := conn.QueryRow(`SELECT COUNT(*) FROM messages WHERE id = ANY($1) AND status = 'delivered'`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == len(ids)
	})
	var lastMoved sql.NullInt64
	if err := conn.QueryRow(`SELECT MAX(delivered_at) FROM messages WHERE id = ANY($1) AND attempts > 1`, ids).Scan(&lastMoved); err != nil {
		t.Fatal(err)
	}
	if lastMoved.Valid {
		// Made due by the takeover, each is claimed at once and delivered
		// within the simulator's second (docs/api.md).
		late := sb.FromMicros(lastMoved.Int64).Sub(killedAt)
		t.Logf("the last message handed over again was delivered %v after the kill", late.Round(time.Millisecond))
		if late > promised+tolerance+time.Second {
			t.Errorf("a message taken over was delivered %v after the kill, want within %v (+%v tolerance, +1s for the simulator)", late, promised, tolerance)
		}
	}

	// Webhooks: every delivered event at least once, repeats with the same
	// delivery id.
	eventually(t, 60*time.Second, "a message.delivered event for every accepted message", func() bool {
		hookMu.Lock()
		defer hookMu.Unlock()
		seen := map[string]bool{}
		for _, r := range received {
			seen[r.message] = true
		}
		for _, id := range ids {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	// Deliveries taken over may still be in flight: wait until none is
	// pending before counting.
	eventually(t, 60*time.Second, "no webhook delivery pending", func() bool {
		var n int
		if err := conn.QueryRow(`SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
	hookMu.Lock()
	byMessage := map[string]map[string]bool{} // message -> delivery ids
	receptions := map[string]int{}            // delivery id -> times received
	for _, r := range received {
		if r.event != sb.EventDelivered {
			t.Errorf("event %q received, want only %s", r.event, sb.EventDelivered)
		}
		if byMessage[r.message] == nil {
			byMessage[r.message] = map[string]bool{}
		}
		byMessage[r.message][r.delivery] = true
		receptions[r.delivery]++
	}
	total := len(received)
	hookMu.Unlock()
	for m, ds := range byMessage {
		if len(ds) != 1 {
			t.Errorf("message %s: its message.delivered event came under %d delivery ids, want 1 (stable across retries)", m, len(ds))
		}
	}
	dupReceptions := total - len(receptions)

	// Duplicates counted and reported.
	var handoffs, takeoverMsgs, takeoverDels, leaseMsgs, leaseDels, simDups float64
	for _, p := range nodes[1:] {
		m := scrapeSeries(t, p.URL)
		takeoverMsgs += m[`switchboard_delivery_redeliveries_total{reason="takeover"}`]
		leaseMsgs += m[`switchboard_delivery_redeliveries_total{reason="lease"}`]
		takeoverDels += m[`switchboard_webhook_redeliveries_total{reason="takeover"}`]
		leaseDels += m[`switchboard_webhook_redeliveries_total{reason="lease"}`]
		simDups += m[`switchboard_simulator_duplicates_total`]
		if live, dead := m[`switchboard_nodes{state="live"}`], m[`switchboard_nodes{state="dead"}`]; live != 2 || dead != 1 {
			t.Errorf("%s: switchboard_nodes live %v, dead %v; want 2 and 1", p.URL, live, dead)
		}
		// A node with other live nodes runs one group-commit writer.
		if w := m[`switchboard_db_writers`]; w != 1 {
			t.Errorf("%s: switchboard_db_writers = %v, want 1", p.URL, w)
		}
	}
	store, err := sqlstore.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	repeated, err := store.RepeatedHandoffs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	handoffs = float64(repeated)
	t.Logf("duplicates: messages handed to a provider more than once %v (taken over %v, lapsed leases %v; the survivors' simulators saw %v ids twice); "+
		"webhook receptions %d of %d deliveries, %d repeated (deliveries taken over %v, lapsed leases %v)",
		handoffs, takeoverMsgs, leaseMsgs, simDups, total, len(receptions), dupReceptions, takeoverDels, leaseDels)
	if takeoverMsgs != float64(moved.Messages) || takeoverDels != float64(moved.Deliveries) {
		t.Errorf("the survivors' takeover counters (%v messages, %v deliveries) differ from their log (%d, %d)",
			takeoverMsgs, takeoverDels, moved.Messages, moved.Deliveries)
	}
	if handoffs < takeoverMsgs {
		t.Errorf("%v messages handed over more than once, fewer than the %v taken over (each is handed over again)", handoffs, takeoverMsgs)
	}
	if float64(dupReceptions) > takeoverDels+leaseDels {
		t.Errorf("the endpoint received %d repeated deliveries, more than the %v the survivors redelivered: a duplicate went uncounted",
			dupReceptions, takeoverDels+leaseDels)
	}

	// A node wrongly declared dead (paused longer than dead-after) learns
	// it at its next beat, says so, and is alive again.
	paused, other := nodes[1], nodes[2]
	pausedID := nodeID(t, paused)
	alive := func(id string) (exists, live bool) {
		var deadAt sql.NullInt64
		err := conn.QueryRow(`SELECT dead_at FROM nodes WHERE id = $1`, id).Scan(&deadAt)
		if err == sql.ErrNoRows {
			return false, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return true, !deadAt.Valid
	}
	paused.cmd.Process.Signal(syscall.SIGSTOP)
	eventually(t, 30*time.Second, "the paused node declared dead", func() bool { _, live := alive(pausedID); return !live })
	paused.cmd.Process.Signal(syscall.SIGCONT)
	eventually(t, 30*time.Second, "the paused node registered again", func() bool {
		_, live := alive(pausedID)
		return live && strings.Contains(paused.logs.String(), "this node had been declared dead")
	})

	// A node that stops cleanly leaves the table (its claims released).
	otherID := nodeID(t, other)
	other.cmd.Process.Signal(syscall.SIGTERM)
	// The log first: Wait closes the pipe the log is read from.
	eventually(t, 30*time.Second, "the stopped node logging that it left", func() bool {
		return strings.Contains(other.logs.String(), "node left the cluster")
	})
	if err := other.cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, other.logs.String())
	}
	if exists, _ := alive(otherID); exists {
		t.Errorf("after a clean stop the node's row is still there")
	}
}

// nodeID returns the node id a process logged when it registered.
func nodeID(t *testing.T, p *process) string {
	t.Helper()
	var id string
	eventually(t, 10*time.Second, "the node registered", func() bool {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			var l struct {
				Msg  string `json:"msg"`
				Node string `json:"node_id"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "node registered" {
				id = l.Node
				return true
			}
		}
		return false
	})
	return id
}

// scrapeSeries reads a node's /metrics into a map from the series (name and
// labels as printed) to its value.
func scrapeSeries(t *testing.T, base string) map[string]float64 {
	t.Helper()
	return scrapeSeriesWith(t, http.DefaultClient, base)
}

// scrapeSeriesWith is scrapeSeries through client.
func scrapeSeriesWith(t *testing.T, client *http.Client, base string) map[string]float64 {
	t.Helper()
	res, err := client.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// serve refuses liveness timings under which one late beat makes a node
// dead: --node-dead-after must be at least twice --heartbeat-interval.
func TestServeLivenessFlags(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--heartbeat-interval", "2s", "--node-dead-after", "3s"}, false},
		{[]string{"--heartbeat-interval", "2s"}, false}, // with the default 3s
		{[]string{"--node-dead-after", "1s"}, false},
		{[]string{"--heartbeat-interval", "500ms", "--node-dead-after", "1s"}, true},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var out syncBuffer
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--database", sqliteURL(t)}, c.args...), noEnv, &out, &out)
		}()
		var err error
		started := false
		deadline := time.After(60 * time.Second)
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-deadline:
				t.Fatalf("%v: serve neither started nor failed", c.args)
			case <-time.After(20 * time.Millisecond):
				if strings.Contains(out.String(), `"msg":"listening"`) {
					started = true
					cancel()
					err = <-done
					break wait
				}
			}
		}
		cancel()
		if c.ok != started || (!c.ok && (err == nil || !strings.Contains(err.Error(), "--node-dead-after"))) {
			t.Errorf("serve %v: started %v, err %v; want started %v", c.args, started, err, c.ok)
		}
	}
}
