package discover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// staleSuffix names the marker file beside the discovered file that says
// discovery prints its last set: it is there from the first run that
// could not read the catalogs to the first that could.
const staleSuffix = ".stale"

// staleMarker is the content of the marker file.
type staleMarker struct {
	Since time.Time `json:"since"`
	Error string    `json:"error"`
}

func (d *Discovery) markerPath() string { return d.Task.DiscoveredFile + staleSuffix }

// keepLast returns the host set discovery printed last, for a run whose
// read failed with cause, and logs the first run of an outage. Without a
// set printed before (the launcher's first runs, with Consul slow or
// down), it returns no host: horovodrun ends the whole job when its first
// discovery fails, while an empty set only makes it wait for workers, and
// it lists no worker that might be draining.
func (d *Discovery) keepLast(cause error) (map[string]drain.Host, error) {
	last, err := readDiscovered(d.Task.DiscoveredFile)
	listed := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, errors.Join(cause, err)
	}
	if _, err := os.Stat(d.markerPath()); errors.Is(err, fs.ErrNotExist) {
		at := d.now().UTC()
		if werr := taskfile.WriteJSON(d.markerPath(), staleMarker{Since: at, Error: cause.Error()}); werr != nil {
			d.logger().Warn("failed to write the stale marker", "error", werr)
		}
		if !listed {
			d.logger().Warn("failed to discover workers before any was listed; printing none until discovery reads", "error", cause)
		} else {
			d.logger().Warn("failed to discover workers; printing the last known hosts until discovery reads again",
				"hosts", len(last.Hosts), "as_of", last.Updated, "error", cause)
		}
	}
	return last.Hosts, nil
}

// noteRecovered ends an outage that keepLast began: it removes the marker
// and logs how long discovery printed its last set.
func (d *Discovery) noteRecovered() {
	m, err := readMarker(d.markerPath())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err := os.Remove(d.markerPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		d.logger().Warn("failed to remove the stale marker", "error", err)
	}
	d.logger().Info("discovery reads the workers again", "stale_for", d.now().Sub(m.Since).Round(time.Millisecond))
}

func readMarker(path string) (staleMarker, error) {
	var m staleMarker
	b, err := os.ReadFile(path)
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("failed to decode %s: %w", path, err)
	}
	return m, nil
}
