package delivery

// Reading a checkpoint safely. A job chooses the path it reports, so the
// planner must copy only what lies under its checkpoint_dirs, and a path
// checked first and opened later can be swapped in between (a link put in
// its place). So nothing is checked by path: the root is opened, the
// checkpoint's parent directory is opened beneath it with openat2
// (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS; a walk of openat(O_NOFOLLOW) calls
// one component at a time where the kernel has no openat2), and each file
// is looked at (fstatat, no links followed) and then opened relative to
// its directory's descriptor, and refused when what was opened is not
// what was looked at. A regular file with more than one hard link is
// refused too: a hard link is the one link no path check can see, and a
// user may make one to any file they can name, the planner's secrets
// included.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// maxCheckpointDepth bounds the directories a checkpoint may nest.
const maxCheckpointDepth = 32

// errLink is a link on a checkpoint's path or inside it.
var errLink = errors.New("a link is on its path (the planner follows no links in checkpoint_dirs)")

// openDirBeneath opens directory rel under root (O_PATH) without
// following any link and without leaving root.
func openDirBeneath(root, rel string) (int, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("failed to open checkpoint dir %s: %w", root, err)
	}
	if rel == "." {
		return rootFD, nil
	}
	defer unix.Close(rootFD)
	fd, err := unix.Openat2(rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		// No openat2 (Linux < 5.6, or a seccomp filter that refuses it).
		return walkBeneath(rootFD, rel)
	}
	return fd, openErr(err)
}

// walkBeneath is openDirBeneath without openat2: one component at a time,
// each opened with O_NOFOLLOW relative to the last (rel is clean and
// relative, so no component is "..").
func walkBeneath(rootFD int, rel string) (int, error) {
	cur, err := unix.Dup(rootFD)
	if err != nil {
		return -1, err
	}
	for _, comp := range strings.Split(rel, string(filepath.Separator)) {
		if comp == ".." || comp == "." || comp == "" {
			unix.Close(cur)
			return -1, fmt.Errorf("invalid path component %q", comp)
		}
		next, err := unix.Openat(cur, comp, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, openErr(err)
		}
		cur = next
	}
	return cur, nil
}

// openErr names the errors of a walk that met a link.
func openErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV), errors.Is(err, unix.ENOTDIR):
		return errLink
	}
	return err
}

// openEntry opens name in directory dirFD for reading: a regular file
// with one link, or a directory, never through a link, and only if what
// it opened is what it looked at (same device and inode).
func openEntry(dirFD int, name string) (*os.File, *unix.Stat_t, error) {
	var before unix.Stat_t
	if err := unix.Fstatat(dirFD, name, &before, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, nil, err
	}
	flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
	switch before.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		return nil, nil, errLink
	case unix.S_IFDIR:
		flags |= unix.O_DIRECTORY
	case unix.S_IFREG:
		if before.Nlink > 1 {
			return nil, nil, fmt.Errorf("has %d hard links; a checkpoint file must have one (a hard link can point at any file)", before.Nlink)
		}
	default:
		return nil, &before, nil // a socket, a device, a pipe: not part of a model; never opened
	}
	fd, err := unix.Openat(dirFD, name, flags, 0)
	if err != nil {
		return nil, nil, openErr(err)
	}
	var after unix.Stat_t
	if err := unix.Fstat(fd, &after); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	if after.Dev != before.Dev || after.Ino != before.Ino || after.Mode&unix.S_IFMT != before.Mode&unix.S_IFMT ||
		(after.Mode&unix.S_IFMT == unix.S_IFREG && after.Nlink > 1) {
		unix.Close(fd)
		return nil, nil, errors.New("changed while it was opened; not copied")
	}
	return os.NewFile(uintptr(fd), name), &after, nil
}

// copyCheckpoint copies the checkpoint src (a file or a directory, which
// locate found) to dst, which it creates: files 0600, directories 0700;
// an entry inside that src.refuse refuses fails the copy.
func copyCheckpoint(ctx context.Context, src source, dst string) error {
	path := src.path
	dirFD, err := openDirBeneath(src.root, filepath.Dir(src.rel))
	if err != nil {
		return checkpointErr(path, err)
	}
	defer unix.Close(dirFD)
	f, st, err := openEntry(dirFD, filepath.Base(src.rel))
	if err != nil {
		return checkpointErr(path, err)
	}
	if f == nil {
		return fmt.Errorf("checkpoint %s is neither a file nor a directory", path)
	}
	defer f.Close()
	return copyOpened(ctx, src, f, st, nil, dst)
}

// checkpointErr says why the checkpoint at path cannot be read.
func checkpointErr(path string, err error) error {
	if errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("cannot read checkpoint %s on the planner's machine (a job that trains on other machines must write its checkpoints to a filesystem the planner shares): %w", path, err)
	}
	return fmt.Errorf("checkpoint %s: %w", path, err)
}

// copyOpened copies the opened file or directory f, at sub below the
// checkpoint src, to dst.
func copyOpened(ctx context.Context, src source, f *os.File, st *unix.Stat_t, sub []string, dst string) error {
	if st.Mode&unix.S_IFMT == unix.S_IFREG {
		return copyData(ctx, f, dst)
	}
	path := filepath.Join(append([]string{src.path}, sub...)...)
	if len(sub) >= maxCheckpointDepth {
		return fmt.Errorf("%s: directories nested over %d deep", path, maxCheckpointDepth)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		return err
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return fmt.Errorf("failed to list %s: %w", path, err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		child := filepath.Join(path, e.Name())
		childSub := append(sub[:len(sub):len(sub)], e.Name())
		if err := src.refuse(child, childSub); err != nil {
			return err
		}
		cf, cst, err := openEntry(int(f.Fd()), e.Name())
		if err != nil {
			return fmt.Errorf("%s: %w", child, err)
		}
		if cf == nil {
			continue
		}
		err = copyOpened(ctx, src, cf, cst, childSub, filepath.Join(dst, e.Name()))
		cf.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// copyData copies the open file in to a new file dst (0600).
func copyData(ctx context.Context, in *os.File, dst string) error {
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, ctxReader{ctx, in}); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
