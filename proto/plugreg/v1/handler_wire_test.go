package plugregv1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// These tests pin the names and field numbers of plugreg.v1.Handler, the
// service that handlers serve and the agent calls: a rename or a
// renumbering in handler.proto would break every handler in the field.

func TestHandlerMethodNames(t *testing.T) {
	const service = "plugreg.v1.Handler"
	file := plugregv1.File_plugreg_v1_handler_proto
	if file.Services().Len() != 1 {
		t.Errorf("%s declares %d services, want 1", file.Path(), file.Services().Len())
	}
	sd := file.Services().ByName("Handler")
	if sd == nil {
		t.Fatalf("service Handler not found in %s", file.Path())
	}
	if got := string(sd.FullName()); got != service {
		t.Errorf("service full name = %q, want %q", got, service)
	}
	if got, want := sd.Methods().Len(), 3; got != want {
		t.Errorf("service %s has %d methods, want %d", service, got, want)
	}
	tests := []struct {
		name      string
		generated string // the generated *_FullMethodName constant
		want      string
		input     protoreflect.FullName
		output    protoreflect.FullName
	}{
		{"Validate", plugregv1.Handler_Validate_FullMethodName, "/plugreg.v1.Handler/Validate", "plugreg.v1.ValidateRequest", "plugreg.v1.ValidateResponse"},
		{"Register", plugregv1.Handler_Register_FullMethodName, "/plugreg.v1.Handler/Register", "plugreg.v1.RegisterRequest", "plugreg.v1.RegisterResponse"},
		{"DeRegister", plugregv1.Handler_DeRegister_FullMethodName, "/plugreg.v1.Handler/DeRegister", "plugreg.v1.DeRegisterRequest", "plugreg.v1.DeRegisterResponse"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.generated != tc.want {
				t.Errorf("generated full method name = %q, want %q", tc.generated, tc.want)
			}
			md := sd.Methods().ByName(protoreflect.Name(tc.name))
			if md == nil {
				t.Fatalf("method %s not found in service %s", tc.name, service)
			}
			if got := "/" + string(md.Parent().FullName()) + "/" + string(md.Name()); got != tc.want {
				t.Errorf("descriptor full method name = %q, want %q", got, tc.want)
			}
			if got := md.Input().FullName(); got != tc.input {
				t.Errorf("input = %q, want %q", got, tc.input)
			}
			if got := md.Output().FullName(); got != tc.output {
				t.Errorf("output = %q, want %q", got, tc.output)
			}
			if md.IsStreamingClient() || md.IsStreamingServer() {
				t.Errorf("streaming client, server = %t, %t; want unary", md.IsStreamingClient(), md.IsStreamingServer())
			}
		})
	}
}

func TestHandlerMessages(t *testing.T) {
	tests := []struct {
		name   protoreflect.Name
		fields []field
	}{
		{"ValidateRequest", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
		}},
		{"ValidateResponse", nil},
		{"RegisterRequest", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
		}},
		{"RegisterResponse", []field{
			{1, "annotations", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.RegisterResponse.AnnotationsEntry"},
		}},
		{"DeRegisterRequest", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
			{2, "reason", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"DeRegisterResponse", nil},
	}
	file := plugregv1.File_plugreg_v1_handler_proto
	if got, want := file.Messages().Len(), len(tests); got != want {
		t.Errorf("%s declares %d messages, want %d", file.Path(), got, want)
	}
	for _, tc := range tests {
		t.Run(string(tc.name), func(t *testing.T) {
			md := file.Messages().ByName(tc.name)
			if md == nil {
				t.Fatalf("message %s not found in %s", tc.name, file.Path())
			}
			if got, want := md.FullName(), protoreflect.FullName("plugreg.v1").Append(tc.name); got != want {
				t.Errorf("full name = %q, want %q", got, want)
			}
			var got []field
			for i := range md.Fields().Len() {
				fd := md.Fields().Get(i)
				f := field{fd.Number(), fd.Name(), fd.Kind(), fd.Cardinality(), ""}
				if fd.Message() != nil {
					f.Message = fd.Message().FullName()
				}
				got = append(got, f)
			}
			if diff := cmp.Diff(tc.fields, got); diff != "" {
				t.Errorf("fields of %s (-want +got):\n%s", md.FullName(), diff)
			}
		})
	}
}
