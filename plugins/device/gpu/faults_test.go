package gpu

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/shoenig/test/must"
)

func TestParseFaults(t *testing.T) {
	cases := []struct {
		name    string
		content string
		want    map[string]gpuFault
		badLine int // number of bad lines
	}{
		{"empty", "", map[string]gpuFault{}, 0},
		{"comments and blanks", "# nothing\n\n   \n", map[string]gpuFault{}, 0},
		{"lost by uuid", "GPU-abc lost", map[string]gpuFault{"GPU-abc": {Lost: true}}, 0},
		{"xid by index", "3 xid 79", map[string]gpuFault{"3": {XIDs: []uint64{79}}}, 0},
		{"index normalised", "03 ecc 2", map[string]gpuFault{"3": {ECC: 2}}, 0},
		{"several lines merge", "GPU-a xid 79\nGPU-a xid 48\nGPU-a ecc 1\n  GPU-a lost  ",
			map[string]gpuFault{"GPU-a": {Lost: true, XIDs: []uint64{79, 48}, ECC: 1}}, 0},
		{"bad lines skipped", "GPU-a\nGPU-a melt\nGPU-a xid\nGPU-a xid x\nGPU-a ecc -1\nGPU-a lost now\nfoo lost\n-1 lost\nGPU-b lost",
			map[string]gpuFault{"GPU-b": {Lost: true}}, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := parseFaults(tc.content)
			must.Eq(t, tc.want, got)
			must.Len(t, tc.badLine, errs)
		})
	}
}

func TestParseFaults_ErrorNamesLine(t *testing.T) {
	_, errs := parseFaults("# ok\nGPU-a melt\n")
	must.Len(t, 1, errs)
	must.StrContains(t, errs[0].Error(), `line 2 "GPU-a melt"`)
	must.StrContains(t, errs[0].Error(), `unknown fault "melt"`)
}

func TestReadFaultFile(t *testing.T) {
	dir := t.TempDir()
	content, err := readFaultFile(filepath.Join(dir, "absent"))
	must.NoError(t, err)
	must.Eq(t, "", content)

	path := filepath.Join(dir, "faults")
	must.NoError(t, os.WriteFile(path, []byte("0 lost\n"), 0o644))
	content, err = readFaultFile(path)
	must.NoError(t, err)
	must.Eq(t, "0 lost\n", content)

	_, err = readFaultFile(dir) // a directory cannot be read
	must.Error(t, err)
}

func TestGPUFault(t *testing.T) {
	must.True(t, gpuFault{}.empty())
	must.False(t, gpuFault{ECC: 1}.empty())
	must.True(t, gpuFault{XIDs: []uint64{1}}.equal(gpuFault{XIDs: []uint64{1}}))
	must.False(t, gpuFault{XIDs: []uint64{1}}.equal(gpuFault{XIDs: []uint64{1, 1}}))
	must.Eq(t, gpuFault{Lost: true, XIDs: []uint64{1, 2}, ECC: 5},
		gpuFault{XIDs: []uint64{1}, ECC: 5}.merge(gpuFault{Lost: true, XIDs: []uint64{2}, ECC: 3}))
}

func TestStableUUID(t *testing.T) {
	format := regexp.MustCompile(`^GPU-[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a := stableUUID("GPU", "host-a", 0)
	must.RegexMatch(t, format, a)
	must.Eq(t, a, stableUUID("GPU", "host-a", 0))
	must.NotEq(t, a, stableUUID("GPU", "host-a", 1))
	must.NotEq(t, a, stableUUID("GPU", "host-b", 0))
	must.NotEq(t, stableUUID("MIG", "host-a", 0, 1), stableUUID("MIG", "host-a", 1, 0))
}

func TestSimTelemetryIsPlausible(t *testing.T) {
	for index := range 8 {
		for tick := range uint64(200) {
			u := simUtilization(index, tick)
			must.Between(t, 10, u, 90)
			must.Between(t, 30, simTemperatureC(u), 75)
			must.Between(t, 50_000, simPowerMilliwatts(u), simPowerLimitMilliwatts)
			total := uint64(40 << 30)
			must.Less(t, total, simMemoryUsedBytes(total, u))
		}
	}
}
