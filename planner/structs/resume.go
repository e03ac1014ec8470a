package structs

import (
	"path/filepath"
	"strings"
)

// ResumeUnder is the checkpoint j resumes from when it starts again, or
// when one of its processes asks (GET /v1/jobs/{id}/resume): the last
// checkpoint it reported, with its step, when that lies under one of
// roots (the planner's checkpoint_dirs); nil when it reported none, or
// one elsewhere, which is not passed on (the job starts over).
func (j *Job) ResumeUnder(roots []string) *Resume {
	pr := j.Progress
	if pr == nil || pr.Checkpoint == "" || pr.CheckpointStep <= 0 || !UnderRoots(pr.Checkpoint, roots) {
		return nil
	}
	return &Resume{Checkpoint: pr.Checkpoint, Step: pr.CheckpointStep}
}

// UnderRoots says whether path is absolute, clean (no "..", no "//") and
// strictly inside one of roots.
func UnderRoots(path string, roots []string) bool {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || strings.ContainsRune(path, 0) {
		return false
	}
	for _, r := range roots {
		r = filepath.Clean(r)
		if !filepath.IsAbs(r) {
			continue
		}
		if rel, err := filepath.Rel(r, path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return true
		}
	}
	return false
}
