package pluginregistration_test

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/testing/protocmp"

	pluginregistration "github.com/plugreg/plugreg/proto/pluginregistration/v1"
)

// These tests pin the wire contract with the kubelet
// (k8s.io/kubelet/pkg/apis/pluginregistration/v1). A failure here means a
// plugin built against the kubelet's bindings no longer interoperates.

const service = "pluginregistration.Registration"

func TestMethodNames(t *testing.T) {
	sd := pluginregistration.File_pluginregistration_v1_api_proto.Services().ByName("Registration")
	if sd == nil {
		t.Fatalf("service Registration not found in %s", pluginregistration.File_pluginregistration_v1_api_proto.Path())
	}
	if got := string(sd.FullName()); got != service {
		t.Errorf("service full name = %q, want %q", got, service)
	}
	if got, want := sd.Methods().Len(), 2; got != want {
		t.Errorf("service %s has %d methods, want %d", service, got, want)
	}
	tests := []struct {
		name      string
		generated string // the generated *_FullMethodName constant
		want      string
		input     protoreflect.FullName
		output    protoreflect.FullName
	}{
		{
			name:      "GetInfo",
			generated: pluginregistration.Registration_GetInfo_FullMethodName,
			want:      "/pluginregistration.Registration/GetInfo",
			input:     "pluginregistration.InfoRequest",
			output:    "pluginregistration.PluginInfo",
		},
		{
			name:      "NotifyRegistrationStatus",
			generated: pluginregistration.Registration_NotifyRegistrationStatus_FullMethodName,
			want:      "/pluginregistration.Registration/NotifyRegistrationStatus",
			input:     "pluginregistration.RegistrationStatus",
			output:    "pluginregistration.RegistrationStatusResponse",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.generated != tc.want {
				t.Errorf("generated full method name = %q, want %q", tc.generated, tc.want)
			}
			md := sd.Methods().ByName(protoreflect.Name(tc.name))
			if md == nil {
				t.Fatalf("method %s not found in service %s", tc.name, sd.FullName())
			}
			if got := "/" + string(md.Parent().FullName()) + "/" + string(md.Name()); got != tc.want {
				t.Errorf("descriptor full method name = %q, want %q", got, tc.want)
			}
			if got := md.FullName(); got != protoreflect.FullName(service+"."+tc.name) {
				t.Errorf("method full name = %q, want %q", got, service+"."+tc.name)
			}
			if got := md.Input().FullName(); got != tc.input {
				t.Errorf("input = %q, want %q", got, tc.input)
			}
			if got := md.Output().FullName(); got != tc.output {
				t.Errorf("output = %q, want %q", got, tc.output)
			}
			if md.IsStreamingClient() || md.IsStreamingServer() {
				t.Errorf("method %s is streaming, want unary", md.FullName())
			}
		})
	}
}

// field is the wire-relevant shape of one message field.
type field struct {
	Number      protoreflect.FieldNumber
	Name        protoreflect.Name
	Kind        protoreflect.Kind
	Cardinality protoreflect.Cardinality
}

func fieldsOf(md protoreflect.MessageDescriptor) []field {
	var fs []field
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		fs = append(fs, field{fd.Number(), fd.Name(), fd.Kind(), fd.Cardinality()})
	}
	return fs
}

func TestMessages(t *testing.T) {
	tests := []struct {
		msg      proto.Message
		fullName protoreflect.FullName
		fields   []field
	}{
		{
			msg:      &pluginregistration.PluginInfo{},
			fullName: "pluginregistration.PluginInfo",
			fields: []field{
				{1, "type", protoreflect.StringKind, protoreflect.Optional},
				{2, "name", protoreflect.StringKind, protoreflect.Optional},
				{3, "endpoint", protoreflect.StringKind, protoreflect.Optional},
				{4, "supported_versions", protoreflect.StringKind, protoreflect.Repeated},
			},
		},
		{
			msg:      &pluginregistration.RegistrationStatus{},
			fullName: "pluginregistration.RegistrationStatus",
			fields: []field{
				{1, "plugin_registered", protoreflect.BoolKind, protoreflect.Optional},
				{2, "error", protoreflect.StringKind, protoreflect.Optional},
			},
		},
		{
			msg:      &pluginregistration.RegistrationStatusResponse{},
			fullName: "pluginregistration.RegistrationStatusResponse",
		},
		{
			msg:      &pluginregistration.InfoRequest{},
			fullName: "pluginregistration.InfoRequest",
		},
	}
	file := pluginregistration.File_pluginregistration_v1_api_proto
	if got, want := file.Messages().Len(), len(tests); got != want {
		t.Errorf("%s declares %d messages, want %d", file.Path(), got, want)
	}
	for _, tc := range tests {
		t.Run(string(tc.fullName.Name()), func(t *testing.T) {
			md := tc.msg.ProtoReflect().Descriptor()
			if got := md.FullName(); got != tc.fullName {
				t.Errorf("full name = %q, want %q", got, tc.fullName)
			}
			if got := file.Messages().ByName(tc.fullName.Name()); got != md {
				t.Errorf("file descriptor message %q = %v, want the generated type's descriptor", tc.fullName.Name(), got)
			}
			if diff := cmp.Diff(tc.fields, fieldsOf(md)); diff != "" {
				t.Errorf("fields of %s (-want +got):\n%s", tc.fullName, diff)
			}
			if md.Syntax() != protoreflect.Proto3 {
				t.Errorf("syntax = %v, want proto3", md.Syntax())
			}
		})
	}
}

// TestWireBytes checks that our messages encode to exactly the bytes the
// kubelet's bindings produce, written out by hand with protowire, and that
// such bytes decode back to the same message.
func TestWireBytes(t *testing.T) {
	appendString := func(b []byte, num protowire.Number, s string) []byte {
		b = protowire.AppendTag(b, num, protowire.BytesType)
		return protowire.AppendString(b, s)
	}
	var info []byte
	info = appendString(info, 1, "CSIPlugin")
	info = appendString(info, 2, "csi.example.com")
	info = appendString(info, 3, "/var/lib/kubelet/plugins/csi.example.com/csi.sock")
	info = appendString(info, 4, "1.0.0")
	info = appendString(info, 4, "1.2.0")

	// proto3 omits a false bool, so only field 2 is on the wire.
	failed := appendString(nil, 2, "RegisterPlugin error -- plugin validation failed with err: boom")

	var registered []byte
	registered = protowire.AppendTag(registered, 1, protowire.VarintType)
	registered = protowire.AppendVarint(registered, protowire.EncodeBool(true))

	tests := []struct {
		name string
		msg  proto.Message
		want []byte
	}{
		{
			name: "PluginInfo",
			msg: &pluginregistration.PluginInfo{
				Type:              "CSIPlugin",
				Name:              "csi.example.com",
				Endpoint:          "/var/lib/kubelet/plugins/csi.example.com/csi.sock",
				SupportedVersions: []string{"1.0.0", "1.2.0"},
			},
			want: info,
		},
		{
			name: "RegistrationStatus/false",
			msg: &pluginregistration.RegistrationStatus{
				Error: "RegisterPlugin error -- plugin validation failed with err: boom",
			},
			want: failed,
		},
		{
			name: "RegistrationStatus/true",
			msg:  &pluginregistration.RegistrationStatus{PluginRegistered: true},
			want: registered,
		},
		{
			name: "InfoRequest",
			msg:  &pluginregistration.InfoRequest{},
			want: nil,
		},
		{
			name: "RegistrationStatusResponse",
			msg:  &pluginregistration.RegistrationStatusResponse{},
			want: nil,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := proto.MarshalOptions{Deterministic: true}.Marshal(tc.msg)
			if err != nil {
				t.Fatalf("Marshal(%v) error: %v", tc.msg, err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Errorf("Marshal(%v) = %x, want %x", tc.msg, got, tc.want)
			}
			decoded := tc.msg.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(tc.want, decoded); err != nil {
				t.Fatalf("Unmarshal(%x) error: %v", tc.want, err)
			}
			if diff := cmp.Diff(tc.msg, decoded, protocmp.Transform()); diff != "" {
				t.Errorf("Unmarshal(%x) (-want +got):\n%s", tc.want, diff)
			}
		})
	}
}
