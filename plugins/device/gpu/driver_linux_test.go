//go:build linux

package gpu

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func TestCheck_MapsReturnCodes(t *testing.T) {
	cases := []struct {
		ret  nvml.Return
		kind error
	}{
		{nvml.ERROR_GPU_IS_LOST, ErrGPULost},
		{nvml.ERROR_NOT_SUPPORTED, ErrNotSupported},
		{nvml.ERROR_FUNCTION_NOT_FOUND, ErrNotSupported},
		{nvml.ERROR_LIBRARY_NOT_FOUND, ErrLibraryNotFound},
		{nvml.ERROR_DRIVER_NOT_LOADED, ErrLibraryNotFound},
		{nvml.ERROR_NOT_FOUND, ErrNotFound},
		{nvml.ERROR_INVALID_ARGUMENT, ErrInvalidArgument},
		{nvml.ERROR_UNKNOWN, nil},
	}
	for _, tc := range cases {
		t.Run(tc.ret.String(), func(t *testing.T) {
			must.NoError(t, check(nvml.SUCCESS, "do nothing"))
			err := check(tc.ret, "get device name")
			must.Error(t, err)
			must.Eq(t, "failed to get device name: "+tc.ret.Error(), err.Error())
			var ne *nvmlError
			must.True(t, errors.As(err, &ne))
			must.Eq(t, int(tc.ret), ne.Code)
			if tc.kind != nil {
				must.ErrorIs(t, err, tc.kind)
			}
			for _, other := range []error{ErrGPULost, ErrNotSupported, ErrLibraryNotFound, ErrNotFound, ErrInvalidArgument} {
				if !errors.Is(tc.kind, other) {
					must.False(t, errors.Is(err, other))
				}
			}
		})
	}
}

// TestDriver_OverDGXA100Mock runs the thin layer over the plain dgxa100
// mock (Func fields, no simulated overrides).
func TestDriver_OverDGXA100Mock(t *testing.T) {
	server := dgxa100.New()
	drv := newNVMLDriver(server)
	must.NoError(t, drv.Init())
	must.True(t, drv.hasNUMA && drv.hasMIG && drv.hasP2P)

	v, err := drv.DriverVersion()
	must.NoError(t, err)
	must.Eq(t, "550.54.15", v)
	n, err := drv.DeviceCount()
	must.NoError(t, err)
	must.Eq(t, 8, n)

	_, err = drv.DeviceByIndex(8)
	must.ErrorIs(t, err, ErrInvalidArgument)

	dev, err := drv.DeviceByIndex(0)
	must.NoError(t, err)
	name, err := dev.Name()
	must.NoError(t, err)
	must.Eq(t, "Mock NVIDIA A100-SXM4-40GB", name)
	mem, err := dev.Memory()
	must.NoError(t, err)
	must.Eq(t, uint64(40960), mem.Total>>20)

	mock0 := server.Devices[0].(*dgxa100.Device)
	mock0.GetNameFunc = func() (string, nvml.Return) { return "", nvml.ERROR_GPU_IS_LOST }
	_, err = dev.Name()
	must.ErrorIs(t, err, ErrGPULost)
	must.StrContains(t, err.Error(), "failed to get device name")

	mock0.GetMigModeFunc = func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED }
	_, err = dev.MIGEnabled()
	must.ErrorIs(t, err, ErrNotSupported)
}

func TestDriver_MissingSymbols(t *testing.T) {
	server := dgxa100.New()
	server.LookupSymbolFunc = func(string) error { return errors.New("undefined symbol") }
	drv := newNVMLDriver(server)
	must.NoError(t, drv.Init())
	dev, err := drv.DeviceByIndex(0)
	must.NoError(t, err)

	_, err = dev.MIGEnabled()
	must.ErrorIs(t, err, ErrNotSupported)
	_, err = dev.MIGDeviceByIndex(0)
	must.ErrorIs(t, err, ErrNotSupported)
	other, _ := drv.DeviceByIndex(1)
	_, err = dev.NVLinkP2P(other)
	must.ErrorIs(t, err, ErrNotSupported)

	// NUMA falls back to sysfs, keyed by the 4-digit-domain bus ID.
	mock0 := server.Devices[0].(*dgxa100.Device)
	mock0.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		var p nvml.PciInfo
		copy(p.BusId[:], "00000000:07:00.0")
		return p, nvml.SUCCESS
	}
	root := t.TempDir()
	old := sysfsRoot
	sysfsRoot = root
	t.Cleanup(func() { sysfsRoot = old })

	_, err = dev.NUMANode()
	must.ErrorIs(t, err, ErrNotSupported) // no sysfs entry

	dir := filepath.Join(root, "bus/pci/devices/0000:07:00.0")
	must.NoError(t, os.MkdirAll(dir, 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "numa_node"), []byte("3\n"), 0o644))
	node, err := dev.NUMANode()
	must.NoError(t, err)
	must.Eq(t, 3, node)

	must.NoError(t, os.WriteFile(filepath.Join(dir, "numa_node"), []byte("-1\n"), 0o644))
	_, err = dev.NUMANode()
	must.ErrorIs(t, err, ErrNotSupported)
}

func TestRealNVML_AbsentLibrary(t *testing.T) {
	b, err := newNVMLBackend(hclog.NewNullLogger())
	if err == nil {
		_ = b.Close()
		t.Skip("libnvidia-ml is installed here")
	}
	must.ErrorIs(t, err, ErrLibraryNotFound)
	_, err = probeNVML()
	must.ErrorIs(t, err, ErrLibraryNotFound)
}
