package gpuwatch

import (
	"bytes"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const devLine = `{"kind":"devices","t_us":1000000,"devices":[{"index":0,"name":"G","uuid":"U","memory_total_bytes":1}]}`

func TestReadTraceErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", "no devices record"},
		{"comments only", "# nothing\n\n", "no devices record"},
		{"bad json", devLine + "\n{\"kind\":", "line 2"},
		{"sample before devices", `{"kind":"sample","t_us":1,"device":0}`, "before the devices record"},
		{"second devices", devLine + "\n" + devLine, "second devices record"},
		{"unknown kind", devLine + "\n" + `{"kind":"temperature","t_us":1}`, `unknown kind "temperature"`},
		{"device out of range", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":1}`, "device 1 not in the 1 listed"},
		{"negative time", devLine + "\n" + `{"kind":"sample","t_us":-1,"device":0}`, "t_us -1 out of"},
		{"time too large", devLine + "\n" + `{"kind":"sample","t_us":9007199254740992,"device":0}`, "out of [0, 2^53)"},
		{"value over 100", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"sm":[[2000000,120]]}`, "sm[0] value 120 out of [0, 100]"},
		{"point after record", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"sm":[[2000001,5]]}`, "after the record's t_us"},
		{"point not a pair", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"mem_ctl":[[2000000]]}`, "want [t_us, value]"},
		{"point time not integer", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"sm":[[1.5,5]]}`, "not an integer"},
		{"negative power", devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"power_w":-3}`, "power_w -3"},
		{"negative wait", devLine + "\n" + `{"kind":"step","t_us":2000000,"client":"c","wait_us":-1}`, "step:"},
		{"huge wait", devLine + "\n" + `{"kind":"step","t_us":2000000,"client":"c","wait_us":9007199254740992}`, "wait_us"},
		{"no client", devLine + "\n" + `{"kind":"not_ready","t_us":2000000}`, "client name"},
		{"negative depth", devLine + "\n" + `{"kind":"queue","t_us":2000000,"client":"c","depth":-1,"capacity":4}`, "depth -1"},
		{"assign out of range", devLine + "\n" + `{"kind":"assign","t_us":2000000,"client":"c","device":7}`, "device 7"},
		{"no_gpu with devices", `{"kind":"devices","t_us":1,"devices":[{"index":0}],"no_gpu":"x"}`, "no_gpu"},
		{"negative index", `{"kind":"devices","t_us":1,"devices":[{"index":-2}]}`, "index -2"},
		{"failure bad device", devLine + "\n" + `{"kind":"failure","t_us":2000000,"device":3,"error":"x"}`, "device 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ReadTrace(strings.NewReader(tc.text))
			if !errors.Is(err, ErrTrace) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadTrace: %v, want ErrTrace mentioning %q", err, tc.want)
			}
		})
	}
}

func TestTraceRoundTrip(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tr := readTraceFile(t, filepath.Base(path))
			var b bytes.Buffer
			if err := WriteTrace(&b, tr); err != nil {
				t.Fatal(err)
			}
			back, err := ReadTrace(&b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tr) {
				t.Errorf("round trip differs")
			}
		})
	}
}

func TestTraceSource(t *testing.T) {
	text := devLine + `
{"kind":"sample","t_us":2000000,"device":0,"sm":[[1500000,10],[2000000,20]],"mem_ctl":[[2000000,5]],"power_w":100}
{"kind":"sample","t_us":3000000,"device":0,"sm":[[2500000,30],[3000000,40]],"power_w":200}
{"kind":"failure","t_us":3500000,"device":0,"error":"nvml gpu 0: ERROR_TIMEOUT"}
{"kind":"sample","t_us":4000000,"device":0,"sm":[[4000000,50]],"power_w":300}
{"kind":"failure","t_us":5000000,"device":0,"error":"nvml gpu 0: ERROR_GPU_IS_LOST","lost":true}
{"kind":"sample","t_us":6000000,"device":0,"sm":[[6000000,60]]}
`
	tr, err := ReadTrace(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	src := NewTraceSource(tr)
	var now time.Time
	src.Now = func() time.Time { return now }
	sec := func(s float64) time.Time { return time.UnixMicro(int64(s * 1e6)).UTC() }
	values := func(ps []Point) []float64 {
		var out []float64
		for _, p := range ps {
			out = append(out, p.Value)
		}
		return out
	}
	tests := []struct {
		name      string
		now       float64
		since     time.Time
		sm        []float64
		power     float64
		errIs     error
		errSubstr string
	}{
		{"before any record", 1.5, time.Time{}, nil, 0, nil, ""},
		{"first poll", 2, time.Time{}, []float64{10, 20}, 100, nil, ""},
		{"since filters", 3, sec(2), []float64{30, 40}, 200, nil, ""},
		{"since mid-record", 3, sec(1.5), []float64{20, 30, 40}, 200, nil, ""},
		{"all so far", 3.2, time.Time{}, []float64{10, 20, 30, 40}, 200, nil, ""},
		{"transient failure", 3.7, sec(3), nil, 0, nil, "ERROR_TIMEOUT"},
		{"recovered", 4, sec(3), []float64{50}, 300, nil, ""},
		{"lost", 5, sec(4), nil, 0, ErrDeviceLost, "ERROR_GPU_IS_LOST"},
		{"lost stays lost", 7, sec(4), nil, 0, ErrDeviceLost, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now = sec(tc.now)
			s, err := src.Sample(0, tc.since)
			if tc.errIs != nil || tc.errSubstr != "" {
				if err == nil || (tc.errIs != nil && !errors.Is(err, tc.errIs)) || !strings.Contains(err.Error(), tc.errSubstr) {
					t.Fatalf("err %v, want %v / %q", err, tc.errIs, tc.errSubstr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(values(s.SM), tc.sm) || s.PowerW != tc.power {
				t.Errorf("sm %v power %v, want %v %v", values(s.SM), s.PowerW, tc.sm, tc.power)
			}
		})
	}
	if _, err := src.Sample(1, time.Time{}); !errors.Is(err, ErrNoDevice) {
		t.Errorf("device 1: %v, want ErrNoDevice", err)
	}
	devs, err := src.Devices()
	if err != nil || len(devs) != 1 || devs[0].Name != "G" {
		t.Errorf("Devices: %v %v", devs, err)
	}
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Devices(); err == nil {
		t.Error("Devices after Close succeeded")
	}

	nogpu, err := ReadTrace(strings.NewReader(`{"kind":"devices","t_us":1,"devices":[],"no_gpu":"open nvml: ERROR_LIBRARY_NOT_FOUND"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewTraceSource(nogpu).Devices(); !errors.Is(err, ErrNoGPU) || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
		t.Errorf("no-GPU trace: %v", err)
	}
}

func TestTraceWriterFailure(t *testing.T) {
	var b bytes.Buffer
	tw := NewTraceWriter(&b)
	t0 := time.UnixMicro(1_000_000).UTC()
	if err := tw.Devices(t0, gpus(1), nil); err != nil {
		t.Fatal(err)
	}
	if err := tw.Failure(t0.Add(time.Second), 0, errors.New("flaky")); err != nil {
		t.Fatal(err)
	}
	if err := tw.Failure(t0.Add(2*time.Second), 0, errors.Join(ErrDeviceLost, errors.New("gone"))); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadTrace(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Failures) != 2 || tr.Failures[0].Lost || !tr.Failures[1].Lost {
		t.Errorf("failures %+v, want the second one lost", tr.Failures)
	}
}

// FuzzReadTrace: ReadTrace never panics; what it accepts writes back and
// reads again to the same Trace; a short accepted trace simulates.
func FuzzReadTrace(f *testing.F) {
	f.Add([]byte(devLine + `
{"kind":"sample","t_us":2000000,"device":0,"sm":[[1500000,10],[2000000,20]],"mem_ctl":[[2000000,5]],"mem_used_bytes":7,"pcie_rx_bytes_per_s":1,"pcie_tx_bytes_per_s":2,"power_w":100,"sm_clock_mhz":1500}
{"kind":"assign","t_us":2000000,"client":"c","device":0}
{"kind":"queue","t_us":2500000,"client":"c","depth":1,"capacity":4}
{"kind":"not_ready","t_us":2600000,"client":"c"}
{"kind":"step","t_us":3000000,"client":"c","wait_us":10,"step_us":90,"client_t_us":5000000}`))
	f.Add([]byte(devLine + "\n" + `{"kind":"failure","t_us":2000000,"device":0,"error":"x","lost":true}`))
	f.Add([]byte(`{"kind":"devices","t_us":1,"devices":[],"no_gpu":"none"}` + "\n" + `{"kind":"step","t_us":5,"client":"c","wait_us":1,"step_us":2,"client_t_us":9}`))
	f.Add([]byte(devLine + "\n" + `{"kind":"sample","t_us":2000000,"device":0,"sm":[["2000000","5e1"]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ReadTrace(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, ErrTrace) {
				t.Fatalf("error %v does not wrap ErrTrace", err)
			}
			return
		}
		var b bytes.Buffer
		if err := WriteTrace(&b, tr); err != nil {
			t.Fatalf("write accepted trace: %v", err)
		}
		back, err := ReadTrace(bytes.NewReader(b.Bytes()))
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, b.Bytes())
		}
		if !reflect.DeepEqual(back, tr) {
			t.Fatalf("round trip differs\n%s", b.Bytes())
		}
		if tr.end().Sub(tr.start()) <= 5*time.Minute {
			r, err := Simulate(tr, Options{})
			if err != nil {
				t.Fatalf("simulate: %v", err)
			}
			_ = Format(r)
		}
	})
}
