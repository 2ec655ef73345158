package oteltrace

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
)

// OTLPConfig is where OTLP sends the spans.
type OTLPConfig struct {
	// Endpoint is the collector's "host:port" (OTLP over HTTP, path /v1/traces).
	// Required.
	Endpoint string
	// Insecure sends over plain HTTP (a collector on loopback); otherwise HTTPS.
	Insecure bool
	// ServiceName names this process in the traces. Default "siteboot".
	ServiceName string
}

// NewOTLP returns a TracerProvider that batches spans to an OTLP/HTTP collector, for a
// host that switches traces on: pass its Tracer(TracerName) to New, and Shutdown it on
// exit (which sends what is batched). Nothing is sent before a span ends.
func NewOTLP(ctx context.Context, c OTLPConfig) (*sdktrace.TracerProvider, error) {
	if c.Endpoint == "" {
		return nil, fmt.Errorf("oteltrace: no OTLP endpoint")
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(c.Endpoint)}
	if c.Insecure {
		opts = append(opts, otlptracehttp.WithInsecure())
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("oteltrace: OTLP exporter: %w", err)
	}
	name := c.ServiceName
	if name == "" {
		name = "siteboot"
	}
	res := resource.NewSchemaless(semconv.ServiceName(name))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
