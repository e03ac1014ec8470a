package builtin

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestQoELeft: qoeRound.left gives the bits t.Sub(now).Seconds() gives,
// for times near and far, with and without a monotonic reading, up to the
// ends of time.Time's range.
func TestQoELeft(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 18))
	base := time.Date(2017, 10, 9, 0, 0, 0, 0, time.UTC)
	times := []time.Time{base, time.Now(), time.Unix(0, 0), time.Unix(1<<62-1, 999999999), time.Unix(1<<62, 0),
		time.Unix(-1<<62, 0), time.Unix(1<<63-1, 999999999), time.Unix(-1<<63, 0), time.Unix(1<<63-62135596801, 5),
		base.Add(1<<33*time.Second - 1), base.Add(-1 << 33 * time.Second), {}}
	random := func() time.Time {
		switch r.IntN(7) {
		case 0:
			return times[r.IntN(len(times))]
		case 1:
			return time.Unix(int64(r.Uint64()), int64(r.IntN(1e9)))
		case 2:
			return time.Now().Add(time.Duration(r.Int64N(1 << 50)))
		case 3: // near the 2^33 s bound
			return base.Add(time.Duration(1<<33-1+r.IntN(3)) * time.Second * time.Duration(1-2*r.IntN(2))).Add(time.Duration(r.IntN(1e9)))
		case 4: // near where a Duration overflows (9,223,372,036 s)
			return time.Unix(base.Unix()+int64(9223372036+r.IntN(3)-1)*int64(1-2*r.IntN(2)), int64(r.IntN(1e9)))
		}
		return base.Add(time.Duration(r.Int64N(1<<52) - 1<<51))
	}
	// Seconds apart, but the later one past the end of time.Time's own
	// seconds (they wrap): Sub saturates.
	edge, past := time.Unix(1<<63-62135596801, 0), time.Unix(1<<63-62135596801+5, 0)
	pairs := [][2]time.Time{{edge, past}, {past, edge}}
	for i := range 200000 {
		now, at := random(), random()
		if i < len(pairs) {
			now, at = pairs[i][0], pairs[i][1]
		}
		var q qoeRound
		q.setNow(now)
		got, want := q.left(at), at.Sub(now).Seconds()
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("%d: left(%v) from %v = %v, want %v", i, at, now, got, want)
		}
	}
}
