// Package metrics measures a ringkms service for Prometheus: the HTTP
// requests of package httpapi and the credentials it refuses (as an
// httpapi.RequestObserver and CredentialObserver), the
// journal's batches and the activity records of a kms.Service (as a
// kms.Observer), the Service's caches, and the Go runtime and process.
// docs/OPERATIONS.md lists every metric, with alert rules.
//
//	m := metrics.New(metrics.Options{})
//	svc, _ := kms.New(store, kms.Options{..., Observer: m})
//	m.Watch(svc)
//	api := httpapi.New(svc, httpapi.Options{Requests: m})
//	mux.Handle("/metrics", m.Handler())
//
// The measurements cost the serving path a few atomic additions per
// request: counters are looked up once per label set and kept, and cache
// counts are read only when scraped.
//
// # Bounded labels
//
// Every label takes its values from a set that the code bounds, never
// from what a caller sends as it is: methods the API does not use count
// as "other", routes are the handler's patterns, an action that is not
// one of the service's own (kms.IsAction) counts as OtherAction, rings past MaxRings as
// OtherRing, and results, reasons, kinds and caches are the service's
// own codes. So callers cannot grow the series, nor the memory that keeps
// them.
package metrics

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
)

var (
	_ kms.Observer               = (*Metrics)(nil)
	_ httpapi.RequestObserver    = (*Metrics)(nil)
	_ httpapi.CredentialObserver = (*Metrics)(nil)
)

// DefaultMaxRings is Options.MaxRings when it is zero.
const DefaultMaxRings = 100

// OtherRing is the ring label of the calls of the rings past MaxRings.
const OtherRing = "other"

// OtherAction is the action label of the activity records whose action is
// not one of the service's own (kms.Actions). The service records none
// (a validation is recorded as action validate, whatever it reports), but
// the label's values stay a closed set whatever a record holds.
const OtherAction = "other"

// CredentialAction is the action label under which kms_denied_total counts
// the requests that httpapi refused for their credential (401) before
// they reached the Service, which records no activity for them; their
// reason is "unauthenticated".
const CredentialAction = "authenticate"

// Options configure the metrics.
type Options struct {
	// MaxRings caps the rings that get a label of their own in the
	// per-ring counts, in the order their first call was counted; the
	// calls of every ring after them count under the ring "other", so
	// that the number of series stays bounded. Zero means DefaultMaxRings.
	MaxRings int
}

// Metrics holds the metrics of one service and the registry they are
// served from. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	// grpcCalls and grpcLatency count the calls of the Kubernetes KMS
	// plugin's gRPC interface, whose methods and codes are few: their
	// series are bounded without a cache.
	grpcCalls   *prometheus.CounterVec
	grpcLatency *prometheus.HistogramVec
	reqMu       sync.RWMutex
	reqs        map[reqKey]reqSeries

	batchSize     prometheus.Histogram
	commitTime    prometheus.Histogram
	appendTime    prometheus.Histogram
	batchFailures prometheus.Counter

	records   *prometheus.CounterVec
	keyCalls  *prometheus.CounterVec
	denied    *prometheus.CounterVec
	throttled *prometheus.CounterVec

	refusedCredentials prometheus.Counter // kms_denied_total of CredentialAction

	recMu    sync.Mutex // guards what ObserveRecords keeps
	maxRings int
	rings    map[string]string // the rings labelled: name -> name
	// series caches the counters of ObserveRecords by metric tag and
	// label values, which are bounded: so is the cache.
	series map[[3]string]prometheus.Counter
}

type reqKey struct {
	method, route string
	status        int
}

type reqSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// callBuckets are the buckets of the durations of calls, HTTP and gRPC:
// 100µs to 10s.
var callBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// counters, histograms and histogram make the metrics of New.
func counters(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

func histograms(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}

func histogram(name, help string, buckets []float64) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets})
}

// New returns the metrics, with the Go runtime's and the process's
// registered.
func New(opts Options) *Metrics {
	m := &Metrics{
		reg:      prometheus.NewRegistry(),
		reqs:     map[reqKey]reqSeries{},
		maxRings: opts.MaxRings,
		rings:    map[string]string{},
		series:   map[[3]string]prometheus.Counter{},
	}
	if m.maxRings <= 0 {
		m.maxRings = DefaultMaxRings
	}
	m.requests = counters("kms_http_requests_total",
		"HTTP requests answered, by method, route pattern (\"unmatched\" when none matched) and status.",
		"method", "route", "code")
	m.latency = histograms("kms_http_request_duration_seconds",
		"Time from a request's arrival to its answer, by method and route pattern.",
		callBuckets, "method", "route")
	m.grpcCalls = counters("kms_grpc_requests_total",
		"gRPC calls answered (the Kubernetes KMS plugin's Status, Encrypt and Decrypt), by method and gRPC code.",
		"method", "code")
	m.grpcLatency = histograms("kms_grpc_request_duration_seconds",
		"Time from a gRPC call's arrival to its answer, by method.",
		callBuckets, "method")
	m.batchSize = histogram("kms_journal_batch_calls",
		"Calls committed together in one journal batch (one durable write of the store and the trail).",
		prometheus.ExponentialBuckets(1, 2, 11)) // 1 to 1024
	m.commitTime = histogram("kms_journal_commit_seconds",
		"Time a journal batch took from its turn to its answers, durable writes included.",
		[]float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5})
	m.appendTime = histogram("kms_trail_append_seconds",
		"Time the activity trail took to append a batch's records and sync them to disk (embedded store).",
		[]float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1})
	m.batchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kms_journal_batch_failures_total",
		Help: "Journal batches that failed as a whole: their calls were answered an error and nothing of them was kept.",
	})
	m.records = counters("kms_activity_records_total",
		"Activity records committed, by action (\"other\" for actions the service does not record of its own) and result (ok, or the kind of the error).",
		"action", "result")
	m.keyCalls = counters("kms_key_operations_total",
		"Successful encrypt and decrypt calls, of /ks rings and of transit keys (transit.encrypt, transit.decrypt, transit.rewrap, transit.datakey), by operation and key ring (rings past the cap count as \"other\").",
		"operation", "ring")
	m.denied = counters("kms_denied_total",
		"Calls refused (a missing permission, a credential or a hash, header or Asset that failed its check), by action (\"other\" for actions the service does not record of its own, \"authenticate\" for credentials refused before any action) and reason.",
		"action", "reason")
	m.refusedCredentials = m.denied.WithLabelValues(CredentialAction, "unauthenticated")
	m.throttled = counters("kms_throttled_total",
		"Calls refused by a throttle: logins, password reset requests, and the rate limits of client addresses, API keys and Accounts (kind ratelimit_address, ratelimit_apikey, ratelimit_account; the refusals a record only counts are counted once that record is written).",
		"kind")
	m.reg.MustRegister(m.requests, m.latency, m.grpcCalls, m.grpcLatency, m.batchSize, m.commitTime, m.appendTime, m.batchFailures,
		m.records, m.keyCalls, m.denied, m.throttled,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics are registered; an embedding program may
// add its own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Watch adds the cache counts of svc, read at each scrape.
func (m *Metrics) Watch(svc *kms.Service) {
	m.reg.MustRegister(cacheCollector{svc})
}

// ObserveRequest counts a request (httpapi.RequestObserver).
func (m *Metrics) ObserveRequest(method, route string, status int, d time.Duration) {
	k := reqKey{method, route, status}
	m.reqMu.RLock()
	s, ok := m.reqs[k]
	m.reqMu.RUnlock()
	if !ok {
		s = m.requestSeries(k)
	}
	s.count.Inc()
	s.latency.Observe(d.Seconds())
}

// ObserveGRPC counts a gRPC call (k8skms.CallObserver).
func (m *Metrics) ObserveGRPC(method, code string, d time.Duration) {
	m.grpcCalls.WithLabelValues(method, code).Inc()
	m.grpcLatency.WithLabelValues(method).Observe(d.Seconds())
}

// maxRequestSeries bounds the request series: methods and statuses that
// clients make up (a route is one of the handler's) could add without
// end.
const maxRequestSeries = 2000

func (m *Metrics) requestSeries(k reqKey) reqSeries {
	route := k.route
	if route == "" {
		route = "unmatched"
	}
	method := k.method
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
	default:
		method = "other"
	}
	s := reqSeries{
		count:   m.requests.WithLabelValues(method, route, strconv.Itoa(k.status)),
		latency: m.latency.WithLabelValues(method, route),
	}
	m.reqMu.Lock()
	if len(m.reqs) < maxRequestSeries {
		m.reqs[k] = s
	}
	m.reqMu.Unlock()
	return s
}

// ObserveBatch measures a journal batch (kms.Observer).
func (m *Metrics) ObserveBatch(calls int, commit, appendTime time.Duration, err error) {
	m.batchSize.Observe(float64(calls))
	m.commitTime.Observe(commit.Seconds())
	if appendTime > 0 {
		m.appendTime.Observe(appendTime.Seconds())
	}
	if err != nil {
		m.batchFailures.Inc()
	}
}

// ObserveRefusedCredential counts a request refused for its credential
// under kms_denied_total (httpapi.CredentialObserver): the Service records
// no activity for it.
func (m *Metrics) ObserveRefusedCredential() { m.refusedCredentials.Inc() }

// ObserveRecords counts the records of a batch (kms.Observer).
func (m *Metrics) ObserveRecords(recs []*kms.Activity) {
	m.recMu.Lock()
	defer m.recMu.Unlock()
	for _, a := range recs {
		// The journal sets result: "ok" or the code of an error kind.
		result, _ := a.Props["result"].(string)
		action := actionLabel(a.Action)
		m.counter(m.records, "r", action, result).Inc()
		calls := refusedCalls(a)
		if !a.Valid {
			m.counter(m.denied, "d", action, result).Add(calls)
		}
		if a.Valid && result == "ok" && keyOperation(a.Action) {
			m.counter(m.keyCalls, "k", a.Action, m.ringLabel(a.Ring)).Inc()
		}
		if result == "rate_limited" {
			switch a.Action {
			case "user.login":
				m.counter(m.throttled, "t", "login", "").Inc()
			case "user.reset.start":
				m.counter(m.throttled, "t", "password_reset", "").Inc()
			case "ratelimit":
				limit, _ := a.Props["limit"].(string)
				m.counter(m.throttled, "t", "ratelimit_"+limit, "").Add(calls)
			}
		}
	}
}

// keyOperation reports whether action is a use of a key that
// kms_key_operations_total counts: encrypt and decrypt of /ks rings, and
// the transit calls that encrypt or decrypt with a transit key.
func keyOperation(action string) bool {
	switch action {
	case "encrypt", "decrypt", "transit.encrypt", "transit.decrypt", "transit.rewrap", "transit.datakey":
		return true
	}
	return false
}

// refusedCalls is how many calls the record a stands for: one, but for
// a ratelimit record, which also counts the refusals of its bucket that
// were not recorded on their own ("suppressed"), and stands for no
// refusal of its own when it only records such a count ("flush").
func refusedCalls(a *kms.Activity) float64 {
	if a.Action != "ratelimit" {
		return 1
	}
	var n float64
	switch v := a.Props["suppressed"].(type) {
	case int:
		n = float64(v)
	case float64:
		n = v
	}
	if a.Props["flush"] != true {
		n++
	}
	return n
}

// actionLabel is the action label of a record of action: action when it
// is one of the service's own, else OtherAction.
func actionLabel(action string) string {
	if kms.IsAction(action) {
		return action
	}
	return OtherAction
}

// counter returns the counter of vec (named by tag in the cache) with
// the labels a and b (b empty: one label), m.recMu held.
func (m *Metrics) counter(vec *prometheus.CounterVec, tag, a, b string) prometheus.Counter {
	k := [3]string{tag, a, b}
	c, ok := m.series[k]
	if !ok {
		if b == "" && tag == "t" {
			c = vec.WithLabelValues(a)
		} else {
			c = vec.WithLabelValues(a, b)
		}
		m.series[k] = c
	}
	return c
}

// ringLabel is the label of ring: its name among the first MaxRings,
// else "other". m.recMu held.
func (m *Metrics) ringLabel(ring string) string {
	if l, ok := m.rings[ring]; ok {
		return l
	}
	if len(m.rings) >= m.maxRings {
		return OtherRing
	}
	m.rings[ring] = ring
	return ring
}

// cacheCollector reads a Service's cache counts at each scrape.
type cacheCollector struct{ svc *kms.Service }

var (
	cacheHits   = prometheus.NewDesc("kms_cache_hits_total", "Cache look-ups that found their entry, by cache.", []string{"cache"}, nil)
	cacheMisses = prometheus.NewDesc("kms_cache_misses_total", "Cache look-ups that read the store, by cache.", []string{"cache"}, nil)
)

func (c cacheCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cacheHits
	ch <- cacheMisses
}

func (c cacheCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.svc.CacheStats() {
		ch <- prometheus.MustNewConstMetric(cacheHits, prometheus.CounterValue, float64(s.Hits), s.Name)
		ch <- prometheus.MustNewConstMetric(cacheMisses, prometheus.CounterValue, float64(s.Misses), s.Name)
	}
}
