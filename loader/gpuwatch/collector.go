package gpuwatch

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exports a Watcher's report to Prometheus: per-GPU gauges, the
// per-client wait share and queue occupancy, and one-hot verdict gauges. It
// builds one report per scrape.
type Collector struct {
	w *Watcher

	smUtil, smBelow, memCtl, memUsed, power, pcie, smClock, samples, lost, gpuVerdict *prometheus.Desc
	verdict, clientWait, clientQueue, clientWaiting                                   *prometheus.Desc
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector over w. Register it once per registry.
func NewCollector(w *Watcher) *Collector {
	gpu := []string{"gpu", "uuid"}
	client := []string{"client"}
	return &Collector{
		w: w,
		smUtil: prometheus.NewDesc("gload_gpu_sm_utilization_ratio",
			"SM utilisation over the watch window, by quantile of the fine-grained samples.", append(gpu, "quantile"), nil),
		smBelow: prometheus.NewDesc("gload_gpu_sm_low_time_ratio",
			"Share of SM utilisation samples in the watch window below the low threshold (30%).", gpu, nil),
		memCtl: prometheus.NewDesc("gload_gpu_memory_controller_utilization_ratio",
			"Median memory-controller utilisation over the watch window.", gpu, nil),
		memUsed: prometheus.NewDesc("gload_gpu_memory_used_bytes",
			"Device memory in use at the last poll.", gpu, nil),
		power: prometheus.NewDesc("gload_gpu_power_watts",
			"Mean power draw over the watch window.", gpu, nil),
		pcie: prometheus.NewDesc("gload_gpu_pcie_throughput_bytes_per_second",
			"Mean PCIe throughput over the watch window.", append(gpu, "direction"), nil),
		smClock: prometheus.NewDesc("gload_gpu_sm_clock_hertz",
			"Mean SM clock over the watch window.", gpu, nil),
		samples: prometheus.NewDesc("gload_gpu_sm_samples",
			"Fine-grained SM utilisation samples in the watch window.", gpu, nil),
		lost: prometheus.NewDesc("gload_gpu_lost",
			"1 while the GPU does not answer NVML.", gpu, nil),
		gpuVerdict: prometheus.NewDesc("gload_gpu_verdict",
			"Starvation verdict of the GPU, one-hot by verdict.", append(gpu, "verdict"), nil),
		verdict: prometheus.NewDesc("gload_watch_verdict",
			"Overall starvation verdict, one-hot by verdict.", []string{"verdict"}, nil),
		clientWait: prometheus.NewDesc("gload_watch_client_wait_ratio",
			"Share of the client's time spent waiting for data over the watch window.", client, nil),
		clientQueue: prometheus.NewDesc("gload_watch_client_queue_occupancy_ratio",
			"Mean occupancy of the client's prefetch queue over the watch window.", client, nil),
		clientWaiting: prometheus.NewDesc("gload_watch_client_waiting",
			"1 when the watcher judges that the client waits for data.", client, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.smUtil, c.smBelow, c.memCtl, c.memUsed, c.power, c.pcie, c.smClock,
		c.samples, c.lost, c.gpuVerdict, c.verdict, c.clientWait, c.clientQueue, c.clientWaiting} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	r := c.w.Report()
	g := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	oneHot := func(s State) func(State) float64 {
		return func(x State) float64 {
			if x == s {
				return 1
			}
			return 0
		}
	}
	for _, d := range r.Devices {
		id, uuid := strconv.Itoa(d.Index), d.UUID
		g(c.smUtil, d.SMP10/100, id, uuid, "0.1")
		g(c.smUtil, d.SMMedian/100, id, uuid, "0.5")
		g(c.smUtil, d.SMP90/100, id, uuid, "0.9")
		g(c.smBelow, d.SMBelowShare, id, uuid)
		g(c.memCtl, d.MemCtlMedian/100, id, uuid)
		g(c.memUsed, float64(d.MemUsed), id, uuid)
		g(c.power, d.PowerW, id, uuid)
		g(c.pcie, d.PCIeRx, id, uuid, "rx")
		g(c.pcie, d.PCIeTx, id, uuid, "tx")
		g(c.smClock, d.SMClockMHz*1e6, id, uuid)
		g(c.samples, float64(d.Samples), id, uuid)
		lost := 0.0
		if d.Lost {
			lost = 1
		}
		g(c.lost, lost, id, uuid)
		is := oneHot(d.Verdict.State)
		for _, s := range States {
			if s != StateNoGPU {
				g(c.gpuVerdict, is(s), id, uuid, string(s))
			}
		}
	}
	is := oneHot(r.Verdict.State)
	for _, s := range States {
		if s != StateLost {
			g(c.verdict, is(s), string(s))
		}
	}
	for _, cl := range r.Clients {
		g(c.clientWait, cl.WaitShare, cl.Client)
		g(c.clientQueue, cl.QueueOccupancy, cl.Client)
		waiting := 0.0
		if cl.Waiting {
			waiting = 1
		}
		g(c.clientWaiting, waiting, cl.Client)
	}
}
