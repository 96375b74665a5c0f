package phonenum

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nyaruka/phonenumbers"
)

// zoneNames returns the names of locs, for comparing against expectations.
func zoneNames(locs []*time.Location) []string {
	names := make([]string, len(locs))
	for i, l := range locs {
		names[i] = l.String()
	}
	return names
}

// mustLoad returns the named locations or fails the test.
func mustLoad(t testing.TB, names ...string) []*time.Location {
	t.Helper()
	locs := make([]*time.Location, len(names))
	for i, n := range names {
		l, err := time.LoadLocation(n)
		if err != nil {
			t.Fatalf("LoadLocation(%q): %v", n, err)
		}
		locs[i] = l
	}
	return locs
}

// mustTime parses an RFC 3339 time or fails the test.
func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("bad test time %q: %v", s, err)
	}
	return tm
}

func TestZones(t *testing.T) {
	utc := []string{"UTC"}
	tests := []struct {
		number string
		want   []string
		why    string
	}{
		{"+12125551234", []string{"America/New_York"}, "Manhattan fixed line or mobile"},
		{"+14155551234", []string{"America/Los_Angeles"}, "San Francisco"},
		{"+442071234567", []string{"Europe/London"}, "London fixed line"},
		{"+447400123456", []string{"Europe/Guernsey", "Europe/Isle_of_Man", "Europe/London"}, "UK mobile: three zones, one offset"},
		{"+19075551234", []string{"America/Adak", "America/Anchorage"}, "Alaska spans two zones"},
		{"+12089998888", []string{"America/Boise", "America/Los_Angeles"}, "Idaho spans two zones"},
		{"+61891234567", []string{"Australia/Adelaide", "Australia/Perth"}, "Australian 08 area"},
		{"+61412345678", []string{"Australia/Sydney"}, "Australian mobiles all map to Sydney"},
		{"+73832123456", []string{"Asia/Novosibirsk"}, "Novosibirsk fixed line"},
		{"+79161234567", []string{"Europe/Moscow"}, "Russian mobiles all map to Moscow"},
		{"+62811234567", []string{"Asia/Jakarta", "Asia/Makassar"}, "Indonesian mobile"},

		{"+18005551234", utc, "US toll-free"},
		{"+19005551234", utc, "US premium rate"},
		{"+15005551234", utc, "US personal number"},
		{"+78001234567", utc, "Russian toll-free"},
		{"+448001234567", utc, "UK freephone"},
		{"+80012345678", utc, "international freephone: Etc/Unknown"},
		{"+15555555555", utc, "unknown number type"},
		{"+447700900123", utc, "Ofcom drama range is not a valid number"},
		{"+99912345678", utc, "unassigned country code"},
		{"+1 212 555 1234", utc, "not E.164"},
		{"12125551234", utc, "no plus"},
		{"", utc, "empty"},
	}
	for _, tt := range tests {
		got := zoneNames(Zones(tt.number))
		if !slices.Equal(got, tt.want) {
			t.Errorf("Zones(%q) (%s) = %v, want %v", tt.number, tt.why, got, tt.want)
		}
	}
}

func TestZonesReturnsCachedLocationsInAFreshSlice(t *testing.T) {
	a := Zones("+19075551234")
	b := Zones("+19075551234")
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("Zones returned %v and %v, want two zones each", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Errorf("zone %d: got different *time.Location values for %s; want the cached one", i, a[i])
		}
	}
	a[0] = nil
	if c := Zones("+19075551234"); c[0] == nil {
		t.Error("modifying a returned slice changed a later result")
	}
	u := Zones("+18005551234")
	u[0] = nil
	if c := Zones("+18005551234"); c[0] != time.UTC {
		t.Error("modifying a returned UTC slice changed a later result")
	}
}

func TestLoadLocationCachesFailures(t *testing.T) {
	if l := loadLocation("No/Such_Zone"); l != nil {
		t.Fatalf("loadLocation of a bogus name = %v, want nil", l)
	}
	if v, ok := locations.Load("No/Such_Zone"); !ok || v.(*time.Location) != nil {
		t.Errorf("failed load not cached as nil: %v, %v", v, ok)
	}
	if l := loadLocation("Europe/Paris"); l == nil || l.String() != "Europe/Paris" {
		t.Errorf("loadLocation(Europe/Paris) = %v", l)
	}
}

func TestQuietUntil(t *testing.T) {
	const notQuiet = ""
	tests := []struct {
		name   string
		number string
		now    string // RFC 3339, written in the recipient's local offset where that helps
		until  string // notQuiet, or the expected instant
	}{
		// New York, winter (EST, -05:00).
		{"NY just before 21:00", "+12125551234", "2025-01-15T20:59:59.999999999-05:00", notQuiet},
		{"NY exactly 21:00", "+12125551234", "2025-01-15T21:00:00-05:00", "2025-01-16T08:00:00-05:00"},
		{"NY late evening", "+12125551234", "2025-01-15T23:59:59-05:00", "2025-01-16T08:00:00-05:00"},
		{"NY midnight", "+12125551234", "2025-01-16T00:00:00-05:00", "2025-01-16T08:00:00-05:00"},
		{"NY just before 08:00", "+12125551234", "2025-01-15T07:59:59.999999999-05:00", "2025-01-15T08:00:00-05:00"},
		{"NY exactly 08:00", "+12125551234", "2025-01-15T08:00:00-05:00", notQuiet},
		{"NY midday given in UTC", "+12125551234", "2025-01-15T17:00:00Z", notQuiet},
		{"NY summer afternoon", "+12125551234", "2025-07-04T12:00:00-04:00", notQuiet},

		// Los Angeles: its own local time counts, not New York's.
		{"LA 20:00 is 23:00 in NY", "+14155551234", "2025-07-01T20:00:00-07:00", notQuiet},
		{"LA 22:00", "+14155551234", "2025-07-01T22:00:00-07:00", "2025-07-02T08:00:00-07:00"},
		{"LA 05:00 is 08:00 in NY", "+14155551234", "2025-07-02T05:00:00-07:00", "2025-07-02T08:00:00-07:00"},

		// United Kingdom.
		{"London BST 07:00", "+442071234567", "2025-06-10T07:00:00+01:00", "2025-06-10T08:00:00+01:00"},
		{"London GMT 20:59", "+442071234567", "2025-12-10T20:59:00Z", notQuiet},
		{"London GMT 21:30", "+442071234567", "2025-12-10T21:30:00Z", "2025-12-11T08:00:00Z"},
		{"UK mobile 21:00 BST", "+447400123456", "2025-06-10T21:00:00+01:00", "2025-06-11T08:00:00+01:00"},

		// Alaska: Adak (HST, -10:00) and Anchorage (AKST, -09:00).
		{"Alaska 08:30 Anchorage is 07:30 Adak", "+19075551234", "2025-01-15T08:30:00-09:00", "2025-01-15T08:00:00-10:00"},
		{"Alaska 08:00 Adak", "+19075551234", "2025-01-15T08:00:00-10:00", notQuiet},
		{"Alaska 20:59 Anchorage", "+19075551234", "2025-01-15T20:59:00-09:00", notQuiet},
		{"Alaska 21:00 Anchorage", "+19075551234", "2025-01-15T21:00:00-09:00", "2025-01-16T08:00:00-10:00"},

		// Idaho: Boise (MST, -07:00) and Los Angeles (PST, -08:00).
		{"Idaho 08:30 Boise is 07:30 LA", "+12089998888", "2025-01-15T07:30:00-08:00", "2025-01-15T08:00:00-08:00"},
		{"Idaho 21:30 Boise is 20:30 LA", "+12089998888", "2025-01-15T20:30:00-08:00", "2025-01-16T08:00:00-08:00"},

		// Australian 08 area: Adelaide (ACDT, +10:30 in January) and Perth (AWST, +08:00).
		{"Adelaide 07:00", "+61891234567", "2025-01-15T07:00:00+10:30", "2025-01-15T08:00:00+08:00"},
		{"Adelaide 21:00, Perth 18:30", "+61891234567", "2025-01-15T21:00:00+10:30", "2025-01-16T08:00:00+08:00"},
		{"Perth noon", "+61891234567", "2025-01-15T12:00:00+08:00", notQuiet},

		// Numbers without a geographic zone use UTC.
		{"toll-free evening UTC", "+18005551234", "2025-01-15T22:00:00Z", "2025-01-16T08:00:00Z"},
		{"toll-free early UTC", "+18005551234", "2025-01-15T07:00:00Z", "2025-01-15T08:00:00Z"},
		{"toll-free daytime UTC, night in NY", "+18005551234", "2025-01-15T12:00:00Z", notQuiet},
		{"international freephone 21:00 UTC", "+80012345678", "2025-01-15T21:00:00Z", "2025-01-16T08:00:00Z"},
		{"unknown type 08:00 UTC", "+15555555555", "2025-01-15T08:00:00Z", notQuiet},
		{"invalid number 03:00 UTC", "+1 212 555 1234", "2025-01-15T03:00:00Z", "2025-01-15T08:00:00Z"},

		// DST transition days. US clocks go forward at 02:00 on 2025-03-09
		// and back at 02:00 on 2025-11-02; UK clocks at 01:00 UTC on
		// 2025-03-30 and 2025-10-26; Adelaide's go back on 2025-04-06 and
		// forward on 2025-10-05.
		{"NY spring forward night", "+12125551234", "2025-03-09T01:30:00-05:00", "2025-03-09T08:00:00-04:00"},
		{"NY evening before spring forward", "+12125551234", "2025-03-08T22:00:00-05:00", "2025-03-09T08:00:00-04:00"},
		{"NY evening of spring forward", "+12125551234", "2025-03-09T21:00:00-04:00", "2025-03-10T08:00:00-04:00"},
		{"NY fall back night", "+12125551234", "2025-11-02T00:30:00-04:00", "2025-11-02T08:00:00-05:00"},
		{"NY evening before fall back", "+12125551234", "2025-11-01T21:00:00-04:00", "2025-11-02T08:00:00-05:00"},
		{"NY repeated hour after fall back", "+12125551234", "2025-11-02T01:30:00-05:00", "2025-11-02T08:00:00-05:00"},
		{"London spring forward night", "+442071234567", "2025-03-30T00:30:00Z", "2025-03-30T08:00:00+01:00"},
		{"London fall back night", "+442071234567", "2025-10-26T00:30:00Z", "2025-10-26T08:00:00Z"},
		{"Alaska on spring forward: zones switch an hour apart", "+19075551234", "2025-03-09T15:00:00Z", "2025-03-09T08:00:00-09:00"},
		{"Adelaide falls back, Perth does not", "+61891234567", "2025-04-05T21:00:00+10:30", "2025-04-06T08:00:00+08:00"},
		{"Adelaide springs forward, Perth does not", "+61891234567", "2025-10-04T22:00:00+09:30", "2025-10-05T08:00:00+08:00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := mustTime(t, tt.now)
			until, quiet := QuietUntil(tt.number, now)
			if until.Location() != time.UTC {
				t.Errorf("until is in %v, want UTC", until.Location())
			}
			if tt.until == notQuiet {
				if quiet || !until.Equal(now) {
					t.Errorf("QuietUntil(%q, %s) = %s, %v; want %s, false", tt.number, tt.now, until, quiet, now.UTC())
				}
				return
			}
			want := mustTime(t, tt.until)
			if !quiet || !until.Equal(want) {
				t.Errorf("QuietUntil(%q, %s) = %s, %v; want %s, true", tt.number, tt.now, until, quiet, want.UTC())
			}
		})
	}
}

func TestQuietUntilFallsBackWhenWindowsNeverOverlap(t *testing.T) {
	// Three zones eight hours apart: every instant is night in one of them.
	zones := []*time.Location{
		time.FixedZone("A", 0),
		time.FixedZone("B", 8*3600),
		time.FixedZone("C", 16*3600),
	}
	now := mustTime(t, "2025-01-15T12:00:00Z") // 12:00 A, 20:00 B, 04:00 C.
	until, quiet := quietUntil(zones, now)
	// Next 08:00s: A at 2025-01-16T08:00Z, B at 2025-01-16T00:00Z,
	// C at 2025-01-15T16:00Z. The latest is A's.
	want := mustTime(t, "2025-01-16T08:00:00Z")
	if !quiet || !until.Equal(want) {
		t.Errorf("quietUntil = %s, %v; want %s, true", until, quiet, want)
	}
}

func TestQuietUntilWithNoZonesIsNeverQuiet(t *testing.T) {
	now := mustTime(t, "2025-01-15T03:00:00Z")
	if until, quiet := quietUntil(nil, now); quiet || !until.Equal(now) {
		t.Errorf("quietUntil(nil) = %s, %v; want now, false", until, quiet)
	}
}

// refQuietUntil is a brute-force reference for quietUntil: it walks forward
// minute by minute. It is exact for zones whose offsets are whole minutes,
// which is every zone in use today.
func refQuietUntil(zones []*time.Location, now time.Time) (time.Time, bool) {
	ok := func(t time.Time) bool {
		for _, z := range zones {
			if h := t.In(z).Hour(); h >= 21 || h < 8 {
				return false
			}
		}
		return true
	}
	if ok(now) {
		return now, false
	}
	first := now.Truncate(time.Minute)
	if first.Before(now) {
		first = first.Add(time.Minute)
	}
	for t := first; !t.After(now.Add(48 * time.Hour)); t = t.Add(time.Minute) {
		if ok(t) {
			return t, true
		}
	}
	var latest time.Time
	for _, z := range zones {
		for t := first; ; t = t.Add(time.Minute) {
			if l := t.In(z); l.Hour() == 8 && l.Minute() == 0 {
				if t.After(latest) {
					latest = t
				}
				break
			}
		}
	}
	return latest, true
}

// zoneSets are groups of zones that stress quietUntil: real multi-zone
// prefixes, whole countries, odd offsets, 30-minute DST, the date line, and
// a group whose windows never overlap.
func zoneSets(t testing.TB) map[string][]*time.Location {
	sets := map[string][]*time.Location{
		"New York":          mustLoad(t, "America/New_York"),
		"Alaska":            mustLoad(t, "America/Adak", "America/Anchorage"),
		"Adelaide+Perth":    mustLoad(t, "Australia/Adelaide", "Australia/Perth"),
		"Lord Howe":         mustLoad(t, "Australia/Lord_Howe", "Australia/Sydney"),
		"odd offsets":       mustLoad(t, "Asia/Kathmandu", "Australia/Eucla", "Pacific/Chatham"),
		"date line":         mustLoad(t, "Pacific/Kiritimati", "Pacific/Pago_Pago", "Pacific/Apia"),
		"Chile":             mustLoad(t, "America/Santiago", "Pacific/Easter"),
		"Brazil":            mustLoad(t, "America/Manaus", "America/Noronha", "America/Rio_Branco", "America/Sao_Paulo"),
		"Europe+Americas":   mustLoad(t, "Europe/London", "America/Los_Angeles"),
		"never overlapping": {time.FixedZone("A", 0), time.FixedZone("B", 8*3600), time.FixedZone("C", 16*3600)},
	}
	for _, cc := range []int{1, 7, 61} {
		names, err := phonenumbers.GetTimezonesForPrefix(strconv.Itoa(cc))
		if err != nil {
			t.Fatal(err)
		}
		sets["+"+strconv.Itoa(cc)+" country"] = mustLoad(t, names...)
	}
	return sets
}

func TestQuietUntilMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := mustTime(t, "2024-01-01T00:00:00Z").Unix()
	end := mustTime(t, "2027-01-01T00:00:00Z").Unix()
	n := 150
	if testing.Short() {
		n = 20
	}
	for name, zones := range zoneSets(t) {
		for range n {
			// Whole minutes half the time, to hit exact boundaries.
			now := time.Unix(start+rng.Int64N(end-start), rng.Int64N(1e9)).UTC()
			if rng.IntN(2) == 0 {
				now = now.Truncate(time.Minute)
			}
			got, gotQuiet := quietUntil(zones, now)
			want, wantQuiet := refQuietUntil(zones, now)
			if gotQuiet != wantQuiet || !got.Equal(want) {
				t.Errorf("%s at %s: quietUntil = %s, %v; brute force says %s, %v",
					name, now, got, gotQuiet, want, wantQuiet)
			}
		}
	}
}

// TestCountryZoneListsAlwaysOverlap checks, for every calling code, that the
// zones libphonenumber lists for the whole country share an allowed window
// throughout 2025 and 2026, so quietUntil never needs its fallback. Every
// prefix's zone list is a subset of its country's, and fewer zones can only
// widen the shared window.
func TestCountryZoneListsAlwaysOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("slow")
	}
	start := mustTime(t, "2025-01-01T00:00:00Z")
	for cc := range phonenumbers.GetSupportedCallingCodes() {
		names, err := phonenumbers.GetTimezonesForPrefix(strconv.Itoa(cc))
		if err != nil {
			t.Fatalf("+%d: %v", cc, err)
		}
		var zones []*time.Location
		for _, n := range names {
			if n == phonenumbers.UNKNOWN_TIMEZONE {
				continue
			}
			l := loadLocation(n)
			if l == nil {
				t.Errorf("+%d: zone %q does not load", cc, n)
				continue
			}
			zones = append(zones, l)
		}
		if len(zones) < 2 {
			continue
		}
		for now := start; now.Year() < 2027; now = now.Add(5 * time.Hour) {
			until, quiet := quietUntil(zones, now)
			if quiet && !allowedEverywhere(until, zones) {
				t.Errorf("+%d %v at %s: no shared window; fell back to %s", cc, names, now, until)
				break
			}
		}
	}
}

func TestQuietUntilConcurrent(t *testing.T) {
	numbers := []string{"+12125551234", "+19075551234", "+61891234567", "+18005551234", "+447400123456"}
	now := mustTime(t, "2025-01-15T21:30:00Z")
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			for j := range 50 {
				QuietUntil(numbers[(i+j)%len(numbers)], now)
			}
		})
	}
	wg.Wait()
}

func FuzzQuietUntil(f *testing.F) {
	seeds := []struct {
		number string
		unix   int64
	}{
		{"+12125551234", 1736992800},  // 2025-01-16T02:00Z, 21:00 in New York.
		{"+14155551234", 1751432400},  // 2025-07-02T05:00Z.
		{"+442071234567", 1743294600}, // 2025-03-30T00:30Z, UK DST change.
		{"+447400123456", 1761438600}, // 2025-10-26T00:30Z.
		{"+19075551234", 1741532400},  // 2025-03-09T15:00Z, US DST change.
		{"+61891234567", 1743845400},  // 2025-04-05T10:30Z, Adelaide DST change.
		{"+12089998888", 1736955000},
		{"+73832123456", 1736955000},
		{"+62811234567", 1736955000},
		{"+18005551234", 1736978400},
		{"+80012345678", 1736978400},
		{"+15555555555", 0},
		{"+1 212 555 1234", -1},
		{"", 1 << 40},
		{"+", -(1 << 40)},
	}
	for _, s := range seeds {
		f.Add(s.number, s.unix, int64(0))
	}
	f.Fuzz(func(t *testing.T, number string, sec, nsec int64) {
		// Keep now within years 1900 to 2300, where zone rules are defined
		// and the brute-force assumptions hold.
		const lo, span = -2208988800, 12623040000
		sec = lo + ((sec-lo)%span+span)%span
		now := time.Unix(sec, nsec%1e9)

		until, quiet := QuietUntil(number, now)
		if until.Location() != time.UTC {
			t.Errorf("until %s is not in UTC", until)
		}
		if !quiet {
			if !until.Equal(now) {
				t.Errorf("QuietUntil(%q, %s) = %s, false; want until == now", number, now, until)
			}
			return
		}
		if !until.After(now) {
			t.Errorf("QuietUntil(%q, %s) = %s, true; want until after now", number, now, until)
		}
		if d := until.Sub(now); d > 25*time.Hour {
			t.Errorf("QuietUntil(%q, %s) = %s, true; %s is more than a day away", number, now, until, d)
		}
		for _, z := range Zones(number) {
			if !allowed(until, z) {
				t.Errorf("QuietUntil(%q, %s) = %s, true; until is %s in %s, still quiet",
					number, now, until, until.In(z).Format(time.TimeOnly), z)
			}
		}
	})
}

func BenchmarkQuietUntil(b *testing.B) {
	now := mustTime(b, "2025-01-15T21:30:00Z")
	for _, number := range []string{"+12125551234", "+61891234567", "+18005551234"} {
		b.Run(number, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				QuietUntil(number, now)
			}
		})
	}
}
