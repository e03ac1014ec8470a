package sim

import (
	"bytes"
	"testing"

	"github.com/shoenig/test/must"
)

func TestFitPublished(t *testing.T) {
	jobs := []JobJCT{{"a", 100}, {"b", 200.4}, {"c", 400}, {"x", 5}}
	f := fitPublished("Tiresias", jobs, map[string]float64{"a": 100, "b": 200, "c": 200, "y": 1})
	must.Eq(t, &PublishedFit{System: "Tiresias", Jobs: 3, Mean: 700.4 / 500, Median: 200.4 / 200,
		P95: (200.4 + 0.9*199.6) / 200, Same: 2}, f)
	must.Nil(t, fitPublished("Tiresias", jobs, map[string]float64{"z": 1}))
}

func TestWriteJCTs(t *testing.T) {
	var b bytes.Buffer
	must.NoError(t, writeJCTs(&b, []*Result{
		{Policy: "p", JobJCTs: []JobJCT{{"a", 1}, {"b", 2.25}}},
		{Policy: "q", JobJCTs: []JobJCT{{"b", 3}}},
	}))
	must.Eq(t, "job,p,q\na,1.0,\nb,2.2,3.0\n", b.String())
}
