// Package promtest reads Prometheus metrics in tests: it parses the text
// format with Prometheus's own parser, and finds a series by its labels.
package promtest

import (
	"io"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is a scrape: metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads metrics in the Prometheus text format.
func Parse(r io.Reader) (Families, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// Value returns the value of the first series of the family name whose
// labels include every "name=value" of labels: a counter's or gauge's
// value, a histogram's count of observations. It returns -1 when there
// is no such series.
func (f Families) Value(name string, labels ...string) float64 {
	fam := f[name]
	if fam == nil {
		return -1
	}
next:
	for _, m := range fam.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}
