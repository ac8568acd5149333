package codec

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/plugreg/plugreg/plugins"
	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
	"github.com/plugreg/plugreg/scan"
)

// ToProto returns p as a plugreg.v1 Plugin, the one message of a plugin
// of the API and of the gRPC handlers. Its source is always set: "socket"
// or "api" (sourceName). A zero RegisteredAt or SocketID is left
// unset, and the uid is set only when p.HasUID.
func ToProto(p plugins.Plugin) *plugregv1.Plugin {
	m := &plugregv1.Plugin{
		Name:        p.Name,
		Type:        p.Type,
		Endpoint:    p.Endpoint,
		SocketPath:  p.SocketPath,
		Versions:    p.Versions,
		Annotations: p.Annotations,
		Source:      sourceName(p),
		Owner:       p.Owner,
		Options:     p.Options,
		NoCheck:     p.NoCheck,
	}
	if !p.RegisteredAt.IsZero() {
		m.RegisteredAt = timestamppb.New(p.RegisteredAt)
	}
	if id := p.SocketID; id != (scan.ID{}) {
		m.SocketId = &plugregv1.SocketID{Dev: id.Dev, Ino: id.Ino, Mtime: id.Mtime, Ctime: id.Ctime, Birth: id.Birth}
	}
	if p.HasUID {
		m.Uid = &p.UID
	}
	return m
}

// FromProto returns the Plugin of m, as ToProto's inverse: source
// "socket" becomes "", as the Registry keeps a discovered plugin's Source;
// an unset time is the zero time, and an unset socket identity the zero
// scan.ID. A nil m is the zero Plugin.
func FromProto(m *plugregv1.Plugin) plugins.Plugin {
	if m == nil {
		return plugins.Plugin{}
	}
	src := m.GetSource()
	if src == plugins.SourceSocket {
		src = ""
	}
	p := plugins.Plugin{
		Name:        m.GetName(),
		Type:        m.GetType(),
		Endpoint:    m.GetEndpoint(),
		SocketPath:  m.GetSocketPath(),
		Versions:    m.GetVersions(),
		Annotations: m.GetAnnotations(),
		Source:      src,
		Owner:       m.GetOwner(),
		Options:     m.GetOptions(),
		NoCheck:     m.GetNoCheck(),
		UID:         m.GetUid(),
		HasUID:      m.Uid != nil,
	}
	if t := m.GetRegisteredAt(); t != nil {
		p.RegisteredAt = t.AsTime()
	}
	if id := m.GetSocketId(); id != nil {
		p.SocketID = scan.ID{Dev: id.GetDev(), Ino: id.GetIno(), Mtime: id.GetMtime(), Ctime: id.GetCtime(), Birth: id.GetBirth()}
	}
	return p
}
