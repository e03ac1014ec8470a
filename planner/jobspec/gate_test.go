package jobspec

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// Issue #13 (parses at once): a full gate answers ErrBusy after its wait,
// and parses again once a slot is free.
func TestGate_BoundsParses(t *testing.T) {
	g := NewGate(2, 50*time.Millisecond)
	src := []byte(job(""))
	ctx := context.Background()

	var releases []func()
	for range 2 {
		release, err := g.Hold(ctx)
		must.NoError(t, err)
		releases = append(releases, release)
	}
	start := time.Now()
	spec, _, err := g.Parse(ctx, src, "job.hcl", submitted)
	must.Nil(t, spec)
	must.True(t, errors.Is(err, ErrBusy), must.Sprint(err))
	must.StrContains(t, err.Error(), "job.hcl")
	must.Greater(t, 40*time.Millisecond, time.Since(start))

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	one := NewGate(1, time.Hour)
	releaseOne, err := one.Hold(ctx)
	must.NoError(t, err)
	_, _, err = one.Parse(cancelled, src, "job.hcl", submitted)
	must.True(t, errors.Is(err, context.Canceled), must.Sprint(err))
	releaseOne()

	releases[0]()
	spec, diags, err := g.Parse(ctx, src, "job.hcl", submitted)
	must.NoError(t, err)
	must.False(t, diags.HasErrors())
	must.Eq(t, "a", spec.Name)
	releases[1]()
}

func TestNewGate_Defaults(t *testing.T) {
	g := NewGate(0, 0)
	must.Eq(t, DefaultParses(), cap(g.slots))
	must.Eq(t, DefaultParseWait, g.wait)
	must.GreaterEq(t, 2, DefaultParses())
	must.LessEq(t, 4, DefaultParses())
}
