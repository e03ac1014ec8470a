package sim

import (
	"bufio"
	"fmt"
	"slices"
)

// queueTables is the per-queue report of a trace's runs (Config.Queues):
// the queues' fairness together per policy, then each policy's queues.
func queueTables(b *bufio.Writer, t *TraceReport) {
	if !slices.ContainsFunc(t.Runs, func(run *RunReport) bool { return run.QueueSummary != nil }) {
		return
	}
	mode := "enforced by the planner (borrowing unless a limit is set)"
	if t.QueuesOff {
		mode = "not enforced: the planner runs without queues; the jobs are grouped by queue for the report only"
	}
	fmt.Fprintf(b, "### Per queue\n\nQueues: %s. Fair share = nominal quota / GPUs; share = mean fraction of the GPUs held "+
		"from the first arrival to the last completion; share waiting = the same while one of its jobs waited with no GPUs; |share - fair| the time-mean; starved = fraction of that time "+
		"the queue held less than its fair share while one of its jobs waited with no GPUs; Jain = Jain's index over "+
		"the queues' share waiting / fair share (those whose jobs ever waited); rho = JCT / run time alone on the queue's fair share (Themis's finish-time fairness).\n\n", mode)
	fmt.Fprint(b, "| policy | queues | Jain | mean abs(share - fair) | mean starved | worst max rho |\n|---|---:|---:|---:|---:|---:|\n")
	for _, run := range t.Runs {
		s := run.QueueSummary
		if s == nil {
			continue
		}
		worst := 0.0
		for _, q := range run.Queues {
			worst = max(worst, q.MaxRho)
		}
		fmt.Fprintf(b, "| %s | %d | %.3f | %.3f | %.3f | %.1f |\n", run.Policy, len(run.Queues), s.Jain,
			s.MeanShareDeviation, s.MeanStarvedFraction, worst)
	}
	fmt.Fprintln(b)
	for _, run := range t.Runs {
		if run.QueueSummary == nil {
			continue
		}
		fmt.Fprintf(b, "%s:\n\n| queue | nominal | jobs | avg JCT | p95 JCT | fair share | share | share waiting | abs(share - fair) | starved | avg rho | max rho | preemptions |\n", run.Policy)
		fmt.Fprint(b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, q := range run.Queues {
			fmt.Fprintf(b, "| %s | %d | %d | %.0f | %.0f | %.3f | %.3f | %.3f | %.3f | %.3f | %.2f | %.1f | %d |\n",
				q.Queue, q.Nominal, q.Jobs, q.MeanJCT, q.P95JCT, q.FairShare, q.Share, q.ShareWaiting, q.ShareDeviation,
				q.StarvedFraction, q.MeanRho, q.MaxRho, q.Preemptions)
		}
		fmt.Fprintln(b)
	}
}
