package structs

import (
	"testing"

	"github.com/shoenig/test/must"
)

// A report token is the HMAC of the job ID under the planner's token:
// stable, different per job and per planner token, none without a token.
func TestReportToken(t *testing.T) {
	a := ReportToken("secret", "job-1")
	must.Eq(t, a, ReportToken("secret", "job-1"))
	must.Len(t, 64, []byte(a))
	must.NotEq(t, a, ReportToken("secret", "job-2"))
	must.NotEq(t, a, ReportToken("other", "job-1"))
	must.Eq(t, "", ReportToken("", "job-1"))
}
