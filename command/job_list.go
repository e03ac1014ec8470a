package command

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// defaultListRows is how many jobs job list shows unless -per-page says.
const defaultListRows = 50

// listOptions are job list's filters and page (job status without an ID).
type listOptions struct {
	state, queue, user, prefix, next string
	perPage                          int
	all                              bool
}

const listHelp = `  -state=<state>[,<state>...]
    Only jobs in this state, or in one of these: queued, running,
    complete, failed, stopped.

  -queue=<queue>[,<queue>...]
    Only jobs of this queue, or of one of these (default: the jobs whose
    jobspec names none).

  -user=<user>
    Only jobs whose jobspec names this user.

  -prefix=<prefix>
    Only jobs whose name or ID starts with this.

  -per-page=<n>
    Show at most n jobs (default 50, at most 5000). When more match, the
    last line says how many and the command that shows the next page.

  -next=<token>
    Show the page that starts where the token says: the one the last line
    of the page before gave (with the same filters).

  -all
    Show every job that matches, reading every page.`

func (o *listOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.state, "state", "", "")
	fs.StringVar(&o.queue, "queue", "", "")
	fs.StringVar(&o.user, "user", "", "")
	fs.StringVar(&o.prefix, "prefix", "", "")
	fs.StringVar(&o.next, "next", "", "")
	fs.IntVar(&o.perPage, "per-page", defaultListRows, "")
	fs.BoolVar(&o.all, "all", false, "")
}

// isListFlag says whether a flag is one of listOptions'.
func isListFlag(name string) bool {
	switch name {
	case "state", "queue", "user", "prefix", "next", "per-page", "all":
		return true
	}
	return false
}

// query is the API's query for the options.
func (o *listOptions) query() api.ListQuery {
	q := api.ListQuery{User: o.user, Prefix: o.prefix, PerPage: o.perPage, NextToken: o.next, Queues: words(o.queue)}
	for _, s := range words(o.state) {
		q.States = append(q.States, structs.JobState(s))
	}
	return q
}

// words are the comma-separated words of s, without blanks.
func words(s string) []string {
	var out []string
	for _, w := range strings.Split(s, ",") {
		if w = strings.TrimSpace(w); w != "" {
			out = append(out, w)
		}
	}
	return out
}

// runList prints a page of the jobs the options select (every page with
// -all) and, where more remain, how to show the next.
func (c *JobStatusCommand) runList(ctx context.Context, cl *client.Client, o *listOptions, asJSON, verbose bool) int {
	if o.perPage < 1 || o.perPage > api.MaxPerPage {
		c.usageError(c.name(), fmt.Sprintf("-per-page must be from 1 to %d", api.MaxPerPage))
		return ExitUsage
	}
	var p *client.JobPage
	var err error
	if o.all {
		q := o.query()
		q.PerPage = api.MaxPerPage
		p, err = cl.AllJobsPage(ctx, q)
	} else {
		p, err = cl.ListJobs(ctx, o.query())
	}
	if err != nil {
		return c.apiError(err)
	}
	var notes []string
	for _, n := range []string{o.pageNote(p), staleJobsNote(p.StaleAsOf)} {
		if n != "" {
			notes = append(notes, n)
		}
	}
	if asJSON {
		for _, n := range notes {
			fmt.Fprintln(c.Err, n)
		}
		return c.printJSON(p.Jobs)
	}
	fmt.Fprintln(c.Out, formatJobList(p.Jobs, verbose))
	if len(notes) > 0 {
		fmt.Fprintln(c.Out, "\n"+strings.Join(notes, "\n"))
	}
	return ExitOK
}

// pageNote says how many of the jobs selected a page shows and the
// command that shows the next page; "" when it shows them all.
func (o *listOptions) pageNote(p *client.JobPage) string {
	switch {
	case p.NextToken != "":
		args := []string{"schedulearn", "job", "list"}
		for _, f := range []struct{ name, value string }{
			{"state", o.state}, {"queue", o.queue}, {"user", o.user}, {"prefix", o.prefix},
		} {
			if f.value != "" {
				args = append(args, "-"+f.name, shellWord(f.value))
			}
		}
		if o.perPage != defaultListRows {
			args = append(args, "-per-page", strconv.Itoa(o.perPage))
		}
		args = append(args, "-next", p.NextToken)
		return fmt.Sprintf("Showing %d of %d jobs; next page: %s (or -all for every one)", len(p.Jobs), p.Total, strings.Join(args, " "))
	case p.Total > len(p.Jobs):
		return fmt.Sprintf("Showing the last %d of %d jobs.", len(p.Jobs), p.Total)
	}
	return ""
}

// shellWord is s as one word of a shell command: as it is when it holds
// nothing a shell reads specially, else in single quotes.
func shellWord(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._,-/:@=+", r))
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
