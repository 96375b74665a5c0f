package phonenum

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
	_ "time/tzdata" // Fallback zone data, so quiet hours never silently degrade to UTC.

	"github.com/nyaruka/phonenumbers"
)

// Quiet hours run from quietStart:00 to quietEnd:00 the next morning, local
// time. A send may go out when the local hour h satisfies
// quietEnd <= h < quietStart.
const (
	quietStart = 21
	quietEnd   = 8

	// horizon bounds the search for an instant that is outside quiet hours
	// in every zone. Allowed windows repeat daily, so two days is ample even
	// around a DST change.
	horizon = 48 * time.Hour
)

// locations caches *time.Location values by zone name, because
// time.LoadLocation reads and parses zone data on every call. A name that
// failed to load is cached as a nil *time.Location so it is not retried.
var locations sync.Map // map[string]*time.Location

// loadLocation returns the cached location called name, loading it on first
// use. It returns nil when the name cannot be loaded.
func loadLocation(name string) *time.Location {
	if v, ok := locations.Load(name); ok {
		return v.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		loc = nil
	}
	v, _ := locations.LoadOrStore(name, loc)
	return v.(*time.Location)
}

// utcOnly returns a new one-element slice holding time.UTC.
func utcOnly() []*time.Location { return []*time.Location{time.UTC} }

// Zones returns the time zones whose local time governs quiet hours for
// number. It never returns an empty slice, and the slice is the caller's to
// keep or modify.
//
// A number that passes Valid and that libphonenumber classifies as a fixed
// line, a mobile or either (its geographic types) gets the zones listed for
// its longest matching prefix in libphonenumber's time-zone data; there may
// be several. Every other number gets [time.UTC]: numbers that fail Valid or
// do not parse, non-geographic types such as toll-free and premium-rate
// numbers (for which the data holds only a whole country's zone list),
// numbers of unknown type, and numbers whose zones are all unknown
// ("Etc/Unknown") or fail to load.
func Zones(number string) []*time.Location {
	if v, ok := zoneCache.Load(number); ok {
		return slices.Clone(v.([]*time.Location))
	}
	locs := zones(number)
	if zoneCacheSize.Add(1) > maxZoneCache {
		zoneCache.Clear() // crude bound: start over rather than grow
		zoneCacheSize.Store(1)
	}
	zoneCache.Store(number, slices.Clone(locs))
	return locs
}

// Parsing a number with libphonenumber costs tens of microseconds, and
// senders write to the same recipients again and again: the zones of recent
// numbers are cached.
var (
	zoneCache     sync.Map // number -> []*time.Location
	zoneCacheSize atomic.Int64
)

const maxZoneCache = 100_000

func zones(number string) []*time.Location {
	if !Valid(number) {
		return utcOnly()
	}
	num, err := phonenumbers.Parse(number, "")
	if err != nil {
		return utcOnly()
	}
	switch phonenumbers.GetNumberType(num) {
	case phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.FIXED_LINE_OR_MOBILE:
	default:
		return utcOnly()
	}
	names, err := phonenumbers.GetTimezonesForNumber(num)
	if err != nil {
		return utcOnly()
	}
	locs := make([]*time.Location, 0, len(names))
	for _, name := range names {
		// LoadLocation maps "" and "UTC" to UTC and "Local" to the host's
		// zone; none of those is a real answer from the data.
		if name == "" || name == "Local" || name == phonenumbers.UNKNOWN_TIMEZONE {
			continue
		}
		if loc := loadLocation(name); loc != nil && !slices.Contains(locs, loc) {
			locs = append(locs, loc)
		}
	}
	if len(locs) == 0 {
		return utcOnly()
	}
	return locs
}

// QuietUntil reports whether number is in quiet hours at now and, if so,
// when the send may go out.
//
// quiet is true when, in at least one of the number's zones (see Zones), the
// local time is in [21:00, 08:00). In that case until is the earliest
// instant after now at which the local time is in [08:00, 21:00) in every
// zone; it is always one of the zones' 08:00 local, worked out with each
// zone's own DST rules. If the zones' allowed windows never all overlap
// within the next 48 hours, which does not happen with libphonenumber's data
// today, until falls back to the latest of the zones' next 08:00. When quiet
// is false, until equals now.
//
// until is always expressed in UTC.
func QuietUntil(number string, now time.Time) (until time.Time, quiet bool) {
	return quietUntil(Zones(number), now)
}

// allowed reports whether t falls outside quiet hours in loc.
func allowed(t time.Time, loc *time.Location) bool {
	h := t.In(loc).Hour()
	return h >= quietEnd && h < quietStart
}

// allowedEverywhere reports whether t falls outside quiet hours in every one
// of zones.
func allowedEverywhere(t time.Time, zones []*time.Location) bool {
	for _, z := range zones {
		if !allowed(t, z) {
			return false
		}
	}
	return true
}

// quietUntil implements QuietUntil for an explicit list of zones.
//
// The set of instants allowed in every zone is an intersection of daily
// windows, so if now is not in it, its earliest later member is the start of
// some zone's window: that zone's 08:00 local. quietUntil therefore tries
// each zone's next few 08:00s in time order and returns the first one that
// is allowed everywhere.
func quietUntil(zones []*time.Location, now time.Time) (time.Time, bool) {
	now = now.UTC()
	if allowedEverywhere(now, zones) {
		return now, false
	}

	limit := now.Add(horizon)
	var (
		buf        [16]time.Time // Avoids an allocation for up to four zones.
		candidates = buf[:0]
		latestNext time.Time // The latest of the zones' next 08:00.
	)
	for _, z := range zones {
		y, m, d := now.In(z).Date()
		next := true
		// Day 0 or day 1 holds the zone's next 08:00, which is less than
		// 25 hours away, so days 0 to 3 cover the whole horizon.
		for day := 0; day <= 3; day++ {
			c := time.Date(y, m, d+day, quietEnd, 0, 0, 0, z)
			if c.Before(now) {
				continue
			}
			if next {
				if c.After(latestNext) {
					latestNext = c
				}
				next = false
			}
			if c.After(limit) {
				break
			}
			candidates = append(candidates, c)
		}
	}
	slices.SortFunc(candidates, time.Time.Compare)
	for _, c := range candidates {
		if allowedEverywhere(c, zones) {
			return c.UTC(), true
		}
	}
	return latestNext.UTC(), true
}
