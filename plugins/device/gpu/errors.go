package gpu

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. NVML return codes are mapped onto these by the thin NVML
// layer (driver_linux.go) so that the rest of the package can use errors.Is
// without importing go-nvml.
var (
	// ErrNotSupported: the GPU or driver does not support the query
	// (ERROR_NOT_SUPPORTED, ERROR_FUNCTION_NOT_FOUND, or a symbol missing
	// from an older libnvidia-ml).
	ErrNotSupported = errors.New("not supported")

	// ErrGPULost: the GPU has fallen off the bus or is otherwise
	// inaccessible (ERROR_GPU_IS_LOST).
	ErrGPULost = errors.New("GPU is lost")

	// ErrLibraryNotFound: libnvidia-ml could not be loaded
	// (ERROR_LIBRARY_NOT_FOUND, ERROR_DRIVER_NOT_LOADED).
	ErrLibraryNotFound = errors.New("NVML library not found")

	// ErrNotFound: the requested object does not exist (ERROR_NOT_FOUND).
	ErrNotFound = errors.New("not found")

	// ErrInvalidArgument: NVML rejected an argument, e.g. an index out of
	// range (ERROR_INVALID_ARGUMENT).
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrUnsupportedPlatform: NVML (and therefore both backends, the
	// simulated one being built on go-nvml's mock) only exists on linux.
	ErrUnsupportedPlatform = errors.New("NVML backends are only available on linux")

	// ErrNotConfigured: a device call arrived before SetConfig.
	ErrNotConfigured = errors.New("plugin is not configured: SetConfig has not been called")
)

// nvmlError carries one NVML return code. Unwrap yields the matching
// sentinel above (or nil), so callers test it with errors.Is.
type nvmlError struct {
	Code int    // the numeric nvml.Return
	Text string // NVML's description of the code
	kind error  // sentinel, may be nil
}

func (e *nvmlError) Error() string { return e.Text }
func (e *nvmlError) Unwrap() error { return e.kind }

// ConfigError reports one invalid plugin configuration key.
type ConfigError struct {
	Key    string // HCL key, "simulated.count" for keys inside the block
	Value  string // the offending value as written, quoted for strings
	Reason string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("invalid plugin config: %s = %s: %s", e.Key, e.Value, e.Reason)
}

// UnknownDeviceError is returned by Reserve for device IDs the plugin has
// not fingerprinted (or that are ignored via ignored_gpu_ids).
type UnknownDeviceError struct {
	IDs []string
}

func (e *UnknownDeviceError) Error() string {
	return fmt.Sprintf("unknown device IDs: %s", strings.Join(e.IDs, ","))
}
