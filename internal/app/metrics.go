package app

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/relayroom/relayroom/internal/status"
	"github.com/relayroom/relayroom/internal/waiters"
)

// metrics live in a registry of the app's own (no global default registry), so two apps
// in one test process do not collide.
type metrics struct {
	registry  *prometheus.Registry
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	toolCalls *prometheus.CounterVec
	toolTime  *prometheus.HistogramVec
}

func newMetrics(pools map[string]*pgxpool.Pool) *metrics {
	m := &metrics{
		registry:  prometheus.NewRegistry(),
		requests:  counter("relayroom_http_requests_total", "HTTP requests by route, method and status.", "route", "method", "status"),
		latency:   latency("relayroom_http_request_duration_seconds", "HTTP request latency by route.", "route", "method"),
		toolCalls: counter("relayroom_tool_calls_total", "MCP tool calls by endpoint, tool and outcome.", "endpoint", "tool", "outcome"),
		toolTime:  latency("relayroom_tool_call_duration_seconds", "MCP tool call latency by endpoint and tool.", "endpoint", "tool"),
	}
	m.registry.MustRegister(m.requests, m.latency, m.toolCalls, m.toolTime,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.registry.MustRegister(poolCollector{pools: pools})
	return m
}

// watchListeners adds relayroom_listener_up, 1 while a LISTEN connection listens and 0
// while it connects or reconnects: alert on a long 0 (long polls and live pages then
// learn of news only at their own periodic checks).
func (m *metrics) watchListeners(ls []status.Listener) {
	for _, l := range ls {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "relayroom_listener_up", Help: "Whether a LISTEN connection of this replica is listening (1) or reconnecting (0).",
			ConstLabels: prometheus.Labels{"listener": l.Name},
		}, func() float64 {
			if l.State() == waiters.StateListening {
				return 1
			}
			return 0
		}))
	}
}

// handler serves the registry in Prometheus's text format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

func counter(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// latency is a histogram of seconds, from half a millisecond (a cached read) to 5 s (past
// the statement timeout), the same buckets for requests and tool calls so they compare.
func latency(name, help string, labels ...string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, labels)
}

// metricMethod is a request's method as a metric label: net/http takes any token as a
// method, and a label made of what callers send would add series without bound, none of
// them ever freed.
func metricMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

func (m *metrics) observeTool(_ context.Context, endpoint, tool, outcome string, d time.Duration) {
	m.toolCalls.WithLabelValues(endpoint, tool, outcome).Inc()
	m.toolTime.WithLabelValues(endpoint, tool).Observe(d.Seconds())
}

// poolCollector reports every pool's statistics at scrape time.
type poolCollector struct {
	pools map[string]*pgxpool.Pool
}

var (
	poolTotal    = prometheus.NewDesc("relayroom_db_pool_connections", "Connections in the pool by state.", []string{"pool", "state"}, nil)
	poolAcquires = prometheus.NewDesc("relayroom_db_pool_acquires_total", "Connections acquired from the pool.", []string{"pool"}, nil)
	poolWait     = prometheus.NewDesc("relayroom_db_pool_acquire_wait_seconds_total", "Time spent waiting for a connection.", []string{"pool"}, nil)
	poolMax      = prometheus.NewDesc("relayroom_db_pool_max_connections", "The pool's size limit.", []string{"pool"}, nil)
)

func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- poolTotal
	ch <- poolAcquires
	ch <- poolWait
	ch <- poolMax
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.pools {
		s := p.Stat()
		ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(s.AcquiredConns()), name, "acquired")
		ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(s.IdleConns()), name, "idle")
		ch <- prometheus.MustNewConstMetric(poolTotal, prometheus.GaugeValue, float64(s.ConstructingConns()), name, "constructing")
		ch <- prometheus.MustNewConstMetric(poolAcquires, prometheus.CounterValue, float64(s.AcquireCount()), name)
		ch <- prometheus.MustNewConstMetric(poolWait, prometheus.CounterValue, s.AcquireDuration().Seconds(), name)
		ch <- prometheus.MustNewConstMetric(poolMax, prometheus.GaugeValue, float64(s.MaxConns()), name)
	}
}
