package gpuwatch

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func TestCollector(t *testing.T) {
	w, err := simulate(readTraceFile(t, "multi2.jsonl"), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(NewCollector(w)); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	// value returns the gauge with the given labels (all must match).
	value := func(name string, labels map[string]string) (float64, bool) {
		mf := byName[name]
		if mf == nil {
			return 0, false
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue metrics
				}
			}
			return m.GetGauge().GetValue(), true
		}
		return 0, false
	}
	r := w.Report()
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"gload_gpu_sm_utilization_ratio", map[string]string{"gpu": "1", "quantile": "0.5"}, r.Devices[1].SMMedian / 100},
		{"gload_gpu_sm_utilization_ratio", map[string]string{"gpu": "0", "quantile": "0.1"}, r.Devices[0].SMP10 / 100},
		{"gload_gpu_sm_low_time_ratio", map[string]string{"gpu": "1"}, r.Devices[1].SMBelowShare},
		{"gload_gpu_memory_controller_utilization_ratio", map[string]string{"gpu": "0"}, 0.55},
		{"gload_gpu_memory_used_bytes", map[string]string{"gpu": "0"}, 75 << 30},
		{"gload_gpu_power_watts", map[string]string{"gpu": "1"}, r.Devices[1].PowerW},
		{"gload_gpu_pcie_throughput_bytes_per_second", map[string]string{"gpu": "0", "direction": "tx"}, 3e8},
		{"gload_gpu_sm_clock_hertz", map[string]string{"gpu": "0"}, 1980e6},
		{"gload_gpu_lost", map[string]string{"gpu": "1"}, 0},
		{"gload_gpu_verdict", map[string]string{"gpu": "1", "verdict": "starved: data"}, 1},
		{"gload_gpu_verdict", map[string]string{"gpu": "1", "verdict": "fed"}, 0},
		{"gload_gpu_verdict", map[string]string{"gpu": "0", "verdict": "fed"}, 1},
		{"gload_watch_verdict", map[string]string{"verdict": "starved: data"}, 1},
		{"gload_watch_verdict", map[string]string{"verdict": "no GPU visible"}, 0},
		{"gload_watch_client_wait_ratio", map[string]string{"client": "rank1"}, r.Clients[1].WaitShare},
		{"gload_watch_client_waiting", map[string]string{"client": "rank1"}, 1},
		{"gload_watch_client_waiting", map[string]string{"client": "rank0"}, 0},
		{"gload_watch_client_queue_occupancy_ratio", map[string]string{"client": "rank0"}, 1},
	}
	for _, tc := range tests {
		got, ok := value(tc.name, tc.labels)
		if !ok || !near(got, tc.want) {
			t.Errorf("%s%v = %v (found %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}
	// One-hot: exactly one overall verdict series is 1.
	ones := 0
	for _, m := range byName["gload_watch_verdict"].GetMetric() {
		ones += int(m.GetGauge().GetValue())
	}
	if n := len(byName["gload_watch_verdict"].GetMetric()); ones != 1 || n != len(States)-1 {
		t.Errorf("overall verdict: %d series set of %d", ones, n)
	}

	// A watcher without GPU still collects (verdict only).
	nw := New(nil, Options{})
	nw.Poll()
	reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(nw))
	if _, err := reg.Gather(); err != nil {
		t.Fatal(err)
	}
}
