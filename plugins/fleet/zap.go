package fleet

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger returns a zap logger for the etcd client that writes to log
// at debug level, whatever the level of the client's entry: the client
// logs each retry of each call, and the publisher says what matters once
// per outage itself.
func zapLogger(log *slog.Logger) *zap.Logger {
	if log == nil {
		return zap.NewNop()
	}
	return zap.New(&slogCore{h: log.Handler()})
}

// slogCore is a zapcore.Core that forwards entries to a slog.Handler.
type slogCore struct {
	h     slog.Handler
	attrs []slog.Attr
}

func (c *slogCore) Enabled(zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slog.LevelDebug)
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{h: c.h, attrs: append(c.attrs[:len(c.attrs):len(c.attrs)], toAttrs(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slog.LevelDebug, "etcd client", 0)
	r.AddAttrs(slog.String("etcd_msg", e.Message), slog.String("etcd_level", e.Level.String()))
	r.AddAttrs(c.attrs...)
	r.AddAttrs(toAttrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (c *slogCore) Sync() error { return nil }

// toAttrs turns zap fields into slog attributes, through zap's own
// encoder of field values.
func toAttrs(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	attrs := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		attrs = append(attrs, slog.Any("etcd_"+k, v))
	}
	return attrs
}
