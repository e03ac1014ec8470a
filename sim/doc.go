// Package sim is a discrete-event simulator of a GPU cluster that drives
// the planner's own scheduling round (planner.Planner, with the project's
// scheduling policies: the builtins in process, an external plugin through
// host.Registry) on job traces, and reports how the jobs fared. README.md
// says which parts of a round are the planner's code and which the
// simulator's.
//
// # The event loop
//
// The cluster is Nodes x GPUsPerNode GPUs. Time advances from event to
// event: a job's arrival, a job reaching the end of its work or of an epoch
// (where its rate changes), and the scheduling rounds every Round (60 s),
// on a grid from second 0; with EventRounds every arrival and completion
// also runs a round. Arrivals and completions happen at their exact times,
// so a job that arrives between rounds waits for the next one, as in the
// Pollux simulator. Each job is submitted to the planner at its arrival
// (Planner.Submit). A round is the planner's (Planner.Round, on an
// in-memory store, with the simulated time as its clock): it reaps the jobs
// whose models are done, builds its snapshot, asks the policy for a plan,
// and carries out the plan's diff through the simulator's actuator, where a
// job whose allocation changes pauses (holds its GPUs, makes no progress)
// for RestartDelay, or InPlaceDelay for a grow or shrink with
// LauncherInPlace. The first start is charged too for goodput jobs (Pollux's
// simulator charges every allocation) but not for rigid ones (a trace's
// duration includes the start-up). Jobs progress at a rate that is constant
// between events, so the loop is exact, and a run costs O(events log jobs)
// plus the rounds. A round of a time-invariant policy in which nothing has
// happened can be skipped (Config.SkipQuietRounds) without changing the run;
// the quiet rounds up to the next event or arrival are skipped in one step
// of the loop, and with no job queued or running the loop goes to the next
// arrival, so time without news costs nothing.
//
// # Bounds
//
// The trace readers refuse, with file:line, what the loop could not order
// or reach: NaN, Inf, negative or overflowing times and durations (at most
// MaxTraceSeconds, 50 years, after the first submission), GPU and replica
// counts beyond MaxGPUs, batch sizes beyond MaxBatch. Run refuses specs with
// such times whatever made them, takes rounds of at least MinRound, and
// fails instead of looping when a job's next event would lie beyond
// MaxSimSeconds (200 years) or simulated time passes it.
//
// # Job models
//
// Rigid (Philly): a job runs for its recorded duration on its recorded GPU
// count (workers of the largest divisor of the count that fits a node).
//
// Goodput (Pollux workloads, the model of the Pollux paper's simulator): a
// job of application A is done when its progress reaches the end of A's
// validation curves (the least progress over the batch sizes at the last
// epoch of the shortest curve). Its progress per second on a placement is
// goodput = efficiency / iteration time, where
//   - the iteration time comes from the placement's measured step and sync
//     times (placements.csv, up to a rotation of the per-node counts, which
//     the model gets largest first, as Pollux's Tiresias lists them;
//     interpolated over the per-GPU batch; other placements interpolated
//     linearly over a Delaunay triangulation of the measured shapes (nodes,
//     replicas, local batch) of placements.csv and scalability.csv, as
//     Pollux's scipy LinearNDInterpolator, but for how degenerate cells
//     split: delaunay.go), with gradient accumulation when
//     the per-GPU batch exceeds the GPU's limit: step + (step - sync) x
//     accumulation steps;
//   - the efficiency is the statistical efficiency of total batch m in the
//     current epoch from the gradient noise scale phi = grad_var/grad_sqr of
//     the validation curves (interpolated between batch sizes):
//     (phi + 1) / (phi/s + 1) with s = m/m0 and m0 the smallest validated
//     batch, i.e. s x E(m) with Pollux's E(m) = (phi_m0 + m0)/(phi_m0 + m);
//     progress is counted in iterations at m0;
//   - with Config.WholeSeconds, each epoch ends on a whole second, as
//     Pollux's simulator rounds it (WholeSecondModel).
//
// The total batch follows BatchMode: fixed (the requested batch, as Pollux's
// simulator runs its baselines), scaled (the requested per-GPU batch), or
// adaptive (the goodput-optimal batch per allocation and epoch, from 50
// geometric samples, with the true model as an oracle: Pollux fits its
// model online). Under JobsAuto a goodput job is rigid (its num_replicas,
// fixed batch) for policies that do not resize, and elastic (1 up to
// MaxBatch/MinLocal GPUs, adaptive batch) for elastic-fifo and goodput, as
// the Pollux paper compares Pollux with Tiresias. The job's speedup table
// (policy.Job.Speedup) comes from the same model (packed placements): the
// job reports its progress to the planner when the table changes, and the
// simulator puts the table into the job's outlook (planner.WithOutlooks),
// from which the planner's snapshot takes it.
//
// Amdahl (Philly jobs with deadlines, Trace.WithDeadlines and
// DeadlineOptions): a job recorded as d seconds on n GPUs is elastic from
// max(1, n/2) to 2n GPUs with speedup g / (1 + s (g - 1)) on g GPUs, its
// work d x speedup(n) seconds on one GPU, and it is due at submit + lambda
// x d; s and lambda are drawn per job from a seeded generator. Such a job
// is submitted with a target (metric "progress", goal 1, the deadline) and
// reports its progress (the fraction done, its throughput) whenever the
// planner's view of it would otherwise be off; the simulator puts its
// remaining work (seconds on one GPU) and speedup into its outlook, and
// the planner's snapshot gives the policy policy.Progress (Value, Target 1,
// Deadline, Throughput, RemainingWork) and Speedup. The run reports the
// deadline satisfaction ratio (Result.Deadlines).
//
// # Results
//
// Per run: average, median and p99 JCT, makespan, queueing delay (to the
// first start), GPU utilisation (GPU-seconds held over GPUs x makespan) and
// its time series, restarts (re-allocations after the first start) per job,
// preemptions, the policy's time per round, the run's wall time, and the
// lower bounds of traces/README.md. Report writes them as JSON and
// Markdown, and plots as hand-written SVG (JCT CDF, GPUs held over time, a
// Gantt chart per GPU).
package sim
