package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// summary is what kmsbench prints at the end, as a table or as JSON.
type summary struct {
	Machine machine `json:"machine"`
	Mode    string  `json:"mode"`
	// KeyType is the transit key's type, in a transit mode (-key-type).
	KeyType string `json:"keyType,omitempty"`
	// Ratios compare the first target with the second: kmsd with the
	// baseline (with -baseline), postgres with embedded (with -embedded),
	// kmsd with against (with -against).
	Ratios *ratios `json:"ratios,omitempty"`
	// Nodes is how many kmsd nodes were loaded; Store their store, when
	// kmsbench started them: embedded, or postgres.
	Nodes int    `json:"nodes"`
	Store string `json:"store,omitempty"`
	// Embedded is set when kmsd on the embedded store (EmbeddedNodes of
	// them, each on a store of its own) were loaded taking turns with them
	// (-embedded, -embedded-nodes).
	Embedded      bool `json:"embedded,omitempty"`
	EmbeddedNodes int  `json:"embeddedNodes,omitempty"`
	// Against is the kmsd binary loaded taking turns with kmsbench's own
	// (-against).
	Against     string    `json:"against,omitempty"`
	RSS         []nodeRSS `json:"rss,omitempty"` // the resident memory of each kmsd (with -rss)
	Rows        []row     `json:"rows"`
	Interrupted bool      `json:"interrupted,omitempty"` // the run stopped early
	Warmup      string    `json:"warmup"`
	// Rounds is how many turns the targets took (with -baseline,
	// -embedded or -against).
	Rounds int `json:"rounds,omitempty"`
	// Batch is the items per request (-batch), when above 1.
	Batch  int `json:"batch,omitempty"`
	ring   string
	awsKey string // the aws modes' -ring, "" when CreateKey made the key
	pool   int
	asset  bool
}

type machine struct {
	CPUs       int    `json:"cpus"`
	CPUModel   string `json:"cpuModel"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"` // kmsbench's Go; a kmsd it built has the same
	OS         string `json:"os"`
}

// nodeRSS is the resident memory of one kmsd.
type nodeRSS struct {
	Target string `json:"target"` // the target it served: kmsd, postgres, embedded or against
	Node   string `json:"node"`   // its URL
	rssStats
}

// row is the measurement of one target. The CPU figures are those of the
// processes that kmsbench started, over the measured loads; absent when
// not known (a -url target, or no /proc).
type row struct {
	Target         string           `json:"target"`          // kmsd, postgres, embedded, against or baseline
	URL            string           `json:"url"`             // its nodes' URLs, separated by commas
	Nodes          []nodeRow        `json:"nodes,omitempty"` // with more than one node: what each was sent
	Mode           string           `json:"mode"`
	Concurrency    int              `json:"concurrency"`
	Requests       int64            `json:"requests"`
	Errors         int64            `json:"errors"`
	ErrorsByStatus map[string]int64 `json:"errorsByStatus,omitempty"` // "transport" for no answer
	Seconds        float64          `json:"seconds"`
	OpsPerSec      float64          `json:"opsPerSec"` // requests (errors included) per second
	P50Ms          float64          `json:"p50Ms"`
	P90Ms          float64          `json:"p90Ms"`
	P99Ms          float64          `json:"p99Ms"`
	MaxMs          float64          `json:"maxMs"`
	CPUSeconds     *float64         `json:"cpuSeconds,omitempty"`      // the CPU time of the target's processes
	CPUUsPerReq    *float64         `json:"cpuUsPerRequest,omitempty"` // CPUSeconds / Requests, in µs
	// ClientCPUUsPerReq is the CPU time kmsbench itself (the load
	// generator) spent per request of this target, in µs: with the
	// server's, what a request costs the machine.
	ClientCPUUsPerReq *float64 `json:"clientCpuUsPerRequest,omitempty"`
	// KeysPerSec is, with -batch, the items (keys handed out or
	// returned) per second: OpsPerSec times the batch size.
	KeysPerSec float64 `json:"keysPerSec,omitempty"`
}

// keyTypeOf is the transit key's type in a transit mode, else "".
func keyTypeOf(o *options) string {
	if transitMode(o.mode) {
		return o.transitKey.String()
	}
	return ""
}

// batchOf is the batch size of o, 0 for single calls.
func batchOf(o *options) int {
	if o.batch > 1 {
		return o.batch
	}
	return 0
}

// nodeRow is what one node of a target was sent, and the CPU time its
// process spent on it.
type nodeRow struct {
	URL         string   `json:"url"`
	Requests    int64    `json:"requests"`
	Errors      int64    `json:"errors"`
	OpsPerSec   float64  `json:"opsPerSec"`
	CPUSeconds  *float64 `json:"cpuSeconds,omitempty"`
	CPUUsPerReq *float64 `json:"cpuUsPerRequest,omitempty"` // CPUSeconds / Requests, in µs
}

// ratios compare the target Of with the target To: Of's figure over To's.
type ratios struct {
	Of            string  `json:"of"`            // the first target: kmsd, or postgres
	To            string  `json:"to"`            // the second: baseline, embedded or against
	ThroughputPct float64 `json:"throughputPct"` // Of's ops/s / To's ops/s, in %
	P99Factor     float64 `json:"p99Factor"`     // Of's p99 / To's p99
	// CPUFactor is Of's CPU per request / To's, when both are known;
	// NodeCPUFactors the same for each node of Of (with several nodes).
	CPUFactor      *float64  `json:"cpuFactor,omitempty"`
	NodeCPUFactors []float64 `json:"nodeCpuFactors,omitempty"`
}

func newSummary(o *options) *summary {
	mode := o.mode
	if mode == "mix" {
		mode = fmt.Sprintf("mix %.0f%% decrypt", o.mix*100)
	}
	store := ""
	switch {
	case o.start && o.store != "":
		store = "postgres"
	case o.start:
		store = "embedded"
	}
	embNodes := 0
	if o.embedded {
		embNodes = o.embNodes
	}
	return &summary{
		EmbeddedNodes: embNodes,
		Nodes:         len(o.urls),
		Store:         store,
		Embedded:      o.embedded,
		Against:       o.against,
		Machine: machine{
			CPUs:       runtime.NumCPU(),
			CPUModel:   cpuModel(),
			GOMAXPROCS: runtime.GOMAXPROCS(0),
			Go:         runtime.Version(),
			OS:         runtime.GOOS + "/" + runtime.GOARCH,
		},
		Mode:    mode,
		KeyType: keyTypeOf(o),
		Warmup:  o.warmup.String(),
		Rounds:  rounds(o),
		Batch:   batchOf(o),
		ring:    o.ring,
		awsKey:  o.awsKey,
		pool:    o.pool,
		asset:   o.asset,
	}
}

func newRow(target string, urls []string, o *options, st *stats) row {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	r := row{
		Target:      target,
		URL:         strings.Join(urls, ","),
		Mode:        o.mode,
		Concurrency: o.concurrency,
		Requests:    st.requests,
		Errors:      st.errors,
		Seconds:     st.elapsed.Seconds(),
		P50Ms:       ms(st.hist.Quantile(0.50)),
		P90Ms:       ms(st.hist.Quantile(0.90)),
		P99Ms:       ms(st.hist.Quantile(0.99)),
		MaxMs:       ms(st.hist.Max()),
	}
	perSec := func(n int64) float64 {
		if st.elapsed <= 0 {
			return 0
		}
		return float64(n) / st.elapsed.Seconds()
	}
	r.OpsPerSec = perSec(st.requests)
	if o.batch > 1 && target != "baseline" {
		r.KeysPerSec = r.OpsPerSec * float64(o.batch)
	}
	known := len(st.cpu) == len(urls)
	if known {
		var sum time.Duration
		for _, d := range st.cpu {
			sum += d
		}
		r.CPUSeconds, r.CPUUsPerReq = cpuFigures(sum, st.requests)
	}
	if st.clientKnown {
		_, r.ClientCPUUsPerReq = cpuFigures(st.clientCPU, st.requests)
	}
	if len(urls) > 1 {
		for i, u := range urls {
			var n nodeCount
			if i < len(st.nodes) {
				n = st.nodes[i]
			}
			nr := nodeRow{URL: u, Requests: n.requests, Errors: n.errors, OpsPerSec: perSec(n.requests)}
			if known {
				nr.CPUSeconds, nr.CPUUsPerReq = cpuFigures(st.cpu[i], n.requests)
			}
			r.Nodes = append(r.Nodes, nr)
		}
	}
	if len(st.byStatus) > 0 {
		r.ErrorsByStatus = maps.Clone(st.byStatus)
	}
	return r
}

// cpuFigures returns cpu in seconds and, when requests is above zero, in
// µs per request.
func cpuFigures(cpu time.Duration, requests int64) (seconds, usPerRequest *float64) {
	sec := cpu.Seconds()
	if requests <= 0 {
		return &sec, nil
	}
	us := float64(cpu.Microseconds()) / float64(requests)
	return &sec, &us
}

// byStatusText is ` (500: 3, transport: 1)`, or "" without errors.
func byStatusText(byStatus map[string]int64) string {
	if len(byStatus) == 0 {
		return ""
	}
	return " (" + errorCounts(byStatus) + ")"
}

// errorCounts is `500: 3, transport: 1`: the counts by name, in the
// order of the names.
func errorCounts(byStatus map[string]int64) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(byStatus)) {
		parts = append(parts, fmt.Sprintf("%s: %d", name, byStatus[name]))
	}
	return strings.Join(parts, ", ")
}

// finish computes the ratios of the first row to the second, when there
// are two: kmsd to the baseline, postgres to embedded, or kmsd to
// against.
func (s *summary) finish() {
	if len(s.Rows) < 2 {
		return
	}
	a, b := &s.Rows[0], &s.Rows[1]
	if b.OpsPerSec == 0 || b.P99Ms == 0 {
		return
	}
	s.Ratios = &ratios{
		Of:            a.Target,
		To:            b.Target,
		ThroughputPct: 100 * a.OpsPerSec / b.OpsPerSec,
		P99Factor:     a.P99Ms / b.P99Ms,
	}
	if a.CPUUsPerReq == nil || b.CPUUsPerReq == nil || *b.CPUUsPerReq == 0 {
		return
	}
	f := *a.CPUUsPerReq / *b.CPUUsPerReq
	s.Ratios.CPUFactor = &f
	for _, n := range a.Nodes {
		if n.CPUUsPerReq == nil {
			s.Ratios.NodeCPUFactors = nil
			return
		}
		s.Ratios.NodeCPUFactors = append(s.Ratios.NodeCPUFactors, *n.CPUUsPerReq / *b.CPUUsPerReq)
	}
}

// print writes the summary to w: a table, or JSON.
func (s *summary) print(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	m := s.Machine
	fmt.Fprintf(w, "machine: %d CPUs (%s), GOMAXPROCS %d, %s %s\n", m.CPUs, m.CPUModel, m.GOMAXPROCS, m.Go, m.OS)
	switch {
	case k8sMode(s.Mode):
		fmt.Fprintf(w, "mode: %s, kmsd's KMS plugin socket, %d-byte data keys", s.Mode, dataKeySize)
	case awsMode(s.Mode) && s.awsKey != "":
		fmt.Fprintf(w, "mode: %s, AWS KMS's protocol signed with SigV4, key %s, %d-byte plaintexts, a context of one pair", s.Mode, s.awsKey, dataKeySize)
	case awsMode(s.Mode):
		fmt.Fprintf(w, "mode: %s, AWS KMS's protocol signed with SigV4, a key made by CreateKey, %d-byte plaintexts, a context of one pair", s.Mode, dataKeySize)
	default:
		fmt.Fprintf(w, "mode: %s, ring %s", s.Mode, s.ring)
	}
	if s.KeyType != "" {
		fmt.Fprintf(w, " (%s)", s.KeyType)
	}
	if s.asset {
		fmt.Fprint(w, ", with an Asset per encrypt")
	}
	switch s.Mode {
	case "encrypt", "transit-encrypt", "transit-sign", "transit-hmac", "k8s-encrypt", "aws-encrypt":
	case "transit-decrypt":
		fmt.Fprintf(w, ", %d ciphertexts to decrypt", s.pool)
	case "k8s-decrypt", "aws-decrypt":
		fmt.Fprintf(w, ", %d of them sealed first to decrypt", s.pool)
	default:
		fmt.Fprintf(w, ", %d headers to decrypt", s.pool)
	}
	fmt.Fprintf(w, ", warm-up %s per target", s.Warmup)
	if s.Rounds > 1 {
		fmt.Fprintf(w, ", %d rounds taking turns", s.Rounds)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "kmsd: %d node", s.Nodes)
	if s.Nodes != 1 {
		fmt.Fprint(w, "s")
	}
	if s.Store != "" {
		fmt.Fprintf(w, " started by kmsbench, store %s", s.Store)
	}
	switch {
	case s.Embedded && s.EmbeddedNodes > 1:
		fmt.Fprintf(w, "; and %d kmsd on the embedded store, each on a store of its own", s.EmbeddedNodes)
	case s.Embedded:
		fmt.Fprint(w, "; and one kmsd on the embedded store")
	}
	if s.Against != "" {
		fmt.Fprintf(w, "; and the kmsd %s, started the same way", s.Against)
	}
	fmt.Fprintln(w)
	if s.Interrupted {
		fmt.Fprintln(w, "INTERRUPTED: the figures cover only part of the run")
	}
	fmt.Fprintln(w)
	table := [][]string{{"target", "mode", "concurrency", "requests", "errors", "seconds", "ops/s", "p50 ms", "p90 ms", "p99 ms", "max ms", "cpu µs/req", "client µs/req"}}
	for _, r := range s.Rows {
		table = append(table, []string{r.Target, r.Mode, strconv.Itoa(r.Concurrency),
			strconv.FormatInt(r.Requests, 10), strconv.FormatInt(r.Errors, 10), fmt.Sprintf("%.1f", r.Seconds),
			fmt.Sprintf("%.0f", r.OpsPerSec), fmt.Sprintf("%.2f", r.P50Ms), fmt.Sprintf("%.2f", r.P90Ms),
			fmt.Sprintf("%.2f", r.P99Ms), fmt.Sprintf("%.2f", r.MaxMs), orDash("%.1f", r.CPUUsPerReq), orDash("%.1f", r.ClientCPUUsPerReq)})
	}
	writeTable(w, table, 2)
	items := map[string]string{"transit-sign": "signatures", "transit-hmac": "HMACs"}[s.Mode]
	if items == "" {
		items = "keys"
	}
	for _, r := range s.Rows {
		if r.KeysPerSec > 0 {
			fmt.Fprintf(w, "%s: %.0f %s/s in batches of %d\n", r.Target, r.KeysPerSec, items, s.Batch)
		}
	}
	for _, r := range s.Rows {
		if len(r.ErrorsByStatus) > 0 {
			fmt.Fprintf(w, "%s errors by status: %s\n", r.Target, errorCounts(r.ErrorsByStatus))
		}
	}
	for _, r := range s.Rows {
		if len(r.Nodes) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%s over %d nodes, client i calling node i mod %d:\n", r.Target, len(r.Nodes), len(r.Nodes))
		nodes := [][]string{{"node", "url", "requests", "errors", "ops/s", "cpu s", "cpu µs/req"}}
		for i, n := range r.Nodes {
			nodes = append(nodes, []string{strconv.Itoa(i + 1), n.URL, strconv.FormatInt(n.Requests, 10),
				strconv.FormatInt(n.Errors, 10), fmt.Sprintf("%.0f", n.OpsPerSec),
				orDash("%.2f", n.CPUSeconds), orDash("%.1f", n.CPUUsPerReq)})
		}
		writeTable(w, nodes, 2)
	}
	if r := s.Ratios; r != nil {
		fmt.Fprintf(w, "\n%s / %s: throughput %.1f %%, p99 %.1fx\n", r.Of, r.To, r.ThroughputPct, r.P99Factor)
		if r.CPUFactor != nil {
			fmt.Fprintf(w, "%s / %s: cpu per request %.2fx", r.Of, r.To, *r.CPUFactor)
			if len(r.NodeCPUFactors) > 0 {
				var parts []string
				for _, f := range r.NodeCPUFactors {
					parts = append(parts, fmt.Sprintf("%.2fx", f))
				}
				fmt.Fprintf(w, ", per node: %s", strings.Join(parts, ", "))
			}
			fmt.Fprintln(w)
		}
	}
	for _, n := range s.RSS {
		name := cmp.Or(n.Target, "kmsd")
		if len(s.RSS) > 1 {
			name += " " + n.Node
		}
		fmt.Fprintf(w, "%s resident memory: peak %.1f MiB, last %.1f MiB (VmRSS sampled every second, %d samples)\n",
			name, float64(n.PeakBytes)/(1<<20), float64(n.LastBytes)/(1<<20), n.Samples)
	}
	return nil
}

// orDash formats *v, or is "-" when v is nil (not known).
func orDash(format string, v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf(format, *v)
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(b)) {
		if name, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(name) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// writeTable writes rows in aligned columns, two spaces apart: the first
// left columns aligned left, the others (numbers) right. Widths count
// runes ("µs" is two).
func writeTable(w io.Writer, rows [][]string, left int) {
	var width []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i < left {
				b.WriteString(c + pad)
			} else {
				b.WriteString(pad + c)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
