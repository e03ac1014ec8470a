// Package device is Nomad's device plugin service: the interface a device
// plugin implements, the values it exchanges with the agent, and the gRPC
// server and client that carry them.
package device

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// ApiVersion010 is the device plugin API version Nomad's agent speaks
// (the only one, up to Nomad 1.11).
const ApiVersion010 = "v0.1.0"

// DeviceTypeGPU is the device type of GPUs.
const DeviceTypeGPU = "gpu"

// DevicePlugin is a device plugin.
type DevicePlugin interface {
	base.BasePlugin

	// Fingerprint streams the devices and their health: at once, then on
	// every change. A response with Error ends the stream, and the agent
	// then stops using the plugin; the channel is closed at the end.
	Fingerprint(ctx context.Context) (<-chan *FingerprintResponse, error)

	// Reserve returns what a task given deviceIDs needs to use them.
	Reserve(deviceIDs []string) (*ContainerReservation, error)

	// Stats streams statistics, about every interval (the agent's
	// collection interval; one second when it sends none).
	Stats(ctx context.Context, interval time.Duration) (<-chan *StatsResponse, error)
}

// FingerprintResponse is one fingerprint, or the error that ends the
// stream.
type FingerprintResponse struct {
	Devices []*DeviceGroup
	Error   error
}

// NewFingerprint is a fingerprint of groups.
func NewFingerprint(groups ...*DeviceGroup) *FingerprintResponse {
	return &FingerprintResponse{Devices: groups}
}

// NewFingerprintError is a fingerprint that ends the stream with err.
func NewFingerprintError(err error) *FingerprintResponse {
	return &FingerprintResponse{Error: err}
}

// DeviceGroup is a set of identical devices; Vendor/Type/Name identify it
// in jobs (`device "nvidia/gpu/<name>"`).
type DeviceGroup struct {
	Vendor     string
	Type       string
	Name       string
	Devices    []*Device
	Attributes map[string]*shared.Attribute
}

// Device is one device of a group.
type Device struct {
	ID         string
	Healthy    bool
	HealthDesc string // why it is unhealthy
	HwLocality *DeviceLocality
}

// DeviceLocality is where a device sits in the machine.
type DeviceLocality struct {
	PciBusID string
}

// Errors of DeviceGroup.Validate.
var (
	ErrNoVendor   = errors.New("device vendor must be set")
	ErrNoType     = errors.New("device type must be set")
	ErrNoName     = errors.New("device name must be set")
	ErrNoDeviceID = errors.New("device ID must be set")
)

// Validate applies the checks the agent applies to every group of a
// fingerprint; one failure makes it reject the fingerprint and stop the
// plugin.
func (g *DeviceGroup) Validate() error {
	var errs []error
	if g.Vendor == "" {
		errs = append(errs, ErrNoVendor)
	}
	if g.Type == "" {
		errs = append(errs, ErrNoType)
	}
	if g.Name == "" {
		errs = append(errs, ErrNoName)
	}
	for i, d := range g.Devices {
		switch {
		case d == nil:
			errs = append(errs, fmt.Errorf("device %d is nil", i))
		case d.ID == "":
			errs = append(errs, fmt.Errorf("device %d: %w", i, ErrNoDeviceID))
		}
	}
	for k, a := range g.Attributes {
		if a == nil {
			errs = append(errs, fmt.Errorf("attribute %q is nil", k))
		} else if err := a.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("attribute %q: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

// ContainerReservation is what a task needs to use its devices:
// environment variables, mounts and device nodes.
type ContainerReservation struct {
	Envs    map[string]string
	Mounts  []*Mount
	Devices []*DeviceSpec
}

// Mount is a host path mounted into the task.
type Mount struct {
	TaskPath string
	HostPath string
	ReadOnly bool
}

// DeviceSpec is a device node made available to the task.
type DeviceSpec struct {
	TaskPath    string
	HostPath    string
	CgroupPerms string // some of "r", "w", "m"
}

// StatsResponse is one round of statistics, or the error that ends the
// stream.
type StatsResponse struct {
	Groups []*DeviceGroupStats
	Error  error
}

// NewStatsError is a statistics response that ends the stream with err.
func NewStatsError(err error) *StatsResponse { return &StatsResponse{Error: err} }

// DeviceGroupStats are the statistics of one group's devices.
type DeviceGroupStats struct {
	Vendor        string
	Type          string
	Name          string
	InstanceStats map[string]*DeviceStats // by device ID
}

// DeviceStats are one device's statistics; Summary is what the agent shows
// first.
type DeviceStats struct {
	Summary   *shared.StatValue
	Stats     *shared.StatObject
	Timestamp time.Time
}
