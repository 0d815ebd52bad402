package loader

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// otherClient is the client label shared by clients beyond MaxClientLabels.
const otherClient = "_other"

// metrics are one Server's Prometheus series, in a registry of its own.
type metrics struct {
	reg     *prometheus.Registry
	batches *prometheus.CounterVec
	// mixRows and mixTokens count what mixtures delivered per source.
	mixRows, mixTokens *prometheus.CounterVec
	bytes              *prometheus.CounterVec
	streams            *prometheus.GaugeVec
	streamErrors       *prometheus.CounterVec
	planSeconds        *prometheus.HistogramVec
	planCache          *prometheus.CounterVec
	queueDepth         *prometheus.GaugeVec
	waitSeconds        *prometheus.HistogramVec
	stepSeconds        *prometheus.HistogramVec
	waitShare          *prometheus.GaugeVec
	labels             *clientLabels
	// authRefused counts calls refused for a missing or wrong token (auth.go).
	authRefused prometheus.Counter
	// limitRefused counts streams refused by a server-wide limit (limits.go).
	limitRefused *prometheus.CounterVec
	// bufferBytes is what open streams have reserved under --max-buffer-bytes.
	bufferBytes prometheus.Gauge
	// connsRefused counts connections closed by admission (admit.go), by reason.
	connsRefused *prometheus.CounterVec
}

func newMetrics(maxClients int, version string) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	ds := []string{"dataset"}
	dc := []string{"dataset", "client"}
	m.mixRows = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_mixture_source_rows_total", Help: "Rows (packed: documents) a mixture delivered, per source.",
	}, []string{"dataset", "source"})
	m.mixTokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_mixture_source_tokens_total", Help: "Tokens a mixture delivered, per source.",
	}, []string{"dataset", "source"})
	m.batches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_batches_sent_total", Help: "Batches sent to clients.",
	}, ds)
	m.bytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_bytes_sent_total", Help: "Batch bytes handed to clients: encoded gRPC messages, and what was written into shared-memory slots.",
	}, ds)
	m.streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gload_open_streams", Help: "Batch streams open now.",
	}, ds)
	m.streamErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_stream_errors_total", Help: "Batch streams that ended with an error, by gRPC code.",
	}, []string{"dataset", "code"})
	m.planSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gload_plan_duration_seconds", Help: "Time to compute an epoch plan (cache misses).",
		Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10),
	}, []string{"policy"})
	m.planCache = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_plan_cache_requests_total", Help: "Plan cache lookups by result (hit, miss).",
	}, []string{"result"})
	m.queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gload_client_queue_depth", Help: "Batches sent to the client and not yet acknowledged.",
	}, dc)
	m.waitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gload_client_wait_seconds", Help: "Time the client's training loop waited for a batch (step reports).",
		Buckets: prometheus.ExponentialBuckets(1e-5, 4, 10),
	}, dc)
	m.stepSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gload_client_step_seconds", Help: "Training step time reported by the client, excluding the wait.",
		Buckets: prometheus.ExponentialBuckets(1e-4, 2.5, 12),
	}, dc)
	m.waitShare = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gload_client_wait_share", Help: "Share of the client's time spent waiting for data (moving average).",
	}, dc)
	m.authRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "gload_auth_refused_total", Help: "Calls refused for a missing or wrong bearer token.",
	})
	m.limitRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_limit_refused_total", Help: "Streams refused with RESOURCE_EXHAUSTED, by the limit that was hit.",
	}, []string{"limit"})
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gload_conns_refused_total", Help: "Connections closed by admission: per_peer (--max-conns-per-peer), auth_timeout (--auth-timeout), evicted_unauthenticated (room for new connections).",
	}, []string{"reason"})
	m.bufferBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "gload_reserved_buffer_bytes", Help: "Bytes reserved by open streams for in-flight batches (gRPC buffers and shm rings).",
	})
	m.reg.MustRegister(m.mixRows, m.mixTokens, m.batches, m.bytes, m.streams, m.streamErrors, m.planSeconds, m.planCache,
		m.queueDepth, m.waitSeconds, m.stepSeconds, m.waitShare, m.authRefused, m.limitRefused, m.bufferBytes, m.connsRefused,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "gload_build_info", Help: "Always 1; the version label is the server's (gload --version).",
			ConstLabels: prometheus.Labels{"version": version},
		}, func() float64 { return 1 }))
	m.labels = newClientLabels(maxClients, func(client string) {
		l := prometheus.Labels{"client": client}
		m.queueDepth.DeletePartialMatch(l)
		m.waitSeconds.DeletePartialMatch(l)
		m.stepSeconds.DeletePartialMatch(l)
		m.waitShare.DeletePartialMatch(l)
	})
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

func (m *metrics) observePlan(policy string, d time.Duration, hit bool) {
	if hit {
		m.planCache.WithLabelValues("hit").Inc()
		return
	}
	m.planCache.WithLabelValues("miss").Inc()
	m.planSeconds.WithLabelValues(policy).Observe(d.Seconds())
}

// clientLabels bounds the client label's cardinality: up to max distinct
// client ids get their own label; when full, the least recently used id
// without open streams is evicted (its series deleted), and if every id has
// open streams the newcomer is labelled "_other".
type clientLabels struct {
	mu     sync.Mutex
	max    int
	ids    map[string]*labelUse
	tick   uint64
	forget func(client string)
}

type labelUse struct {
	active int
	last   uint64
}

func newClientLabels(maxIDs int, forget func(string)) *clientLabels {
	return &clientLabels{max: maxIDs, ids: map[string]*labelUse{}, forget: forget}
}

// acquire returns the label for id and counts one more stream on it.
func (c *clientLabels) acquire(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tick++
	if u, ok := c.ids[id]; ok {
		u.active++
		u.last = c.tick
		return id
	}
	if id == otherClient {
		return otherClient
	}
	if len(c.ids) >= c.max {
		var victim string
		var oldest uint64
		for k, u := range c.ids {
			if u.active == 0 && (victim == "" || u.last < oldest) {
				victim, oldest = k, u.last
			}
		}
		if victim == "" {
			return otherClient
		}
		delete(c.ids, victim)
		c.forget(victim)
	}
	c.ids[id] = &labelUse{active: 1, last: c.tick}
	return id
}

// release ends one stream on label.
func (c *clientLabels) release(label string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if u, ok := c.ids[label]; ok && u.active > 0 {
		u.active--
	}
}
