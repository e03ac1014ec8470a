//go:build !linux

package delivery

import (
	"context"
	"errors"
)

// copyCheckpoint needs openat2 or O_NOFOLLOW walks (checkpoint_linux.go):
// elsewhere the planner delivers no files.
func copyCheckpoint(context.Context, source, string) error {
	return errors.New("model delivery of files needs a planner on Linux")
}
