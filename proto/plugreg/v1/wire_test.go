package plugregv1_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/reflect/protoreflect"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// These tests pin plugreg.v1's names, so that a rename or renumbering in
// registry.proto, which would break existing clients, fails loudly.

func TestMethodNames(t *testing.T) {
	checkService(t, plugregv1.File_plugreg_v1_registry_proto, "Registry", []method{
		{"List", plugregv1.Registry_List_FullMethodName, "/plugreg.v1.Registry/List", "plugreg.v1.ListRequest", "plugreg.v1.ListResponse", false},
		{"Get", plugregv1.Registry_Get_FullMethodName, "/plugreg.v1.Registry/Get", "plugreg.v1.GetRequest", "plugreg.v1.Plugin", false},
		{"Watch", plugregv1.Registry_Watch_FullMethodName, "/plugreg.v1.Registry/Watch", "plugreg.v1.WatchRequest", "plugreg.v1.Event", true},
		{"Register", plugregv1.Registry_Register_FullMethodName, "/plugreg.v1.Registry/Register", "plugreg.v1.RegisterPluginRequest", "plugreg.v1.RegisterPluginResponse", false},
		{"Deregister", plugregv1.Registry_Deregister_FullMethodName, "/plugreg.v1.Registry/Deregister", "plugreg.v1.DeregisterPluginRequest", "plugreg.v1.DeregisterPluginResponse", false},
		{"Status", plugregv1.Registry_Status_FullMethodName, "/plugreg.v1.Registry/Status", "plugreg.v1.StatusRequest", "plugreg.v1.StatusResponse", false},
	})
}

// method is what a test pins of one method of a service.
type method struct {
	name      string
	generated string // the generated *_FullMethodName constant
	want      string
	input     protoreflect.FullName
	output    protoreflect.FullName
	streaming bool // server streaming
}

// checkService checks that file declares one service, called name in
// package plugreg.v1, with exactly the methods given.
func checkService(t *testing.T, file protoreflect.FileDescriptor, name protoreflect.Name, methods []method) {
	t.Helper()
	if file.Services().Len() != 1 {
		t.Errorf("%s declares %d services, want 1", file.Path(), file.Services().Len())
	}
	sd := file.Services().ByName(name)
	if sd == nil {
		t.Fatalf("service %s not found in %s", name, file.Path())
	}
	service := protoreflect.FullName("plugreg.v1").Append(name)
	if got := sd.FullName(); got != service {
		t.Errorf("service full name = %q, want %q", got, service)
	}
	if got, want := sd.Methods().Len(), len(methods); got != want {
		t.Errorf("service %s has %d methods, want %d", service, got, want)
	}
	for _, tc := range methods {
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
			if md.IsStreamingClient() || md.IsStreamingServer() != tc.streaming {
				t.Errorf("streaming client, server = %t, %t; want false, %t",
					md.IsStreamingClient(), md.IsStreamingServer(), tc.streaming)
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
	Message     protoreflect.FullName // message fields only
}

// message is what a test pins of one message.
type message struct {
	name   protoreflect.Name
	fields []field
}

func TestMessages(t *testing.T) {
	checkMessages(t, plugregv1.File_plugreg_v1_registry_proto, []message{
		{"Plugin", []field{
			{1, "name", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "endpoint", protoreflect.StringKind, protoreflect.Optional, ""},
			{4, "socket_path", protoreflect.StringKind, protoreflect.Optional, ""},
			{5, "versions", protoreflect.StringKind, protoreflect.Repeated, ""},
			{6, "registered_at", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{7, "annotations", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.Plugin.AnnotationsEntry"},
			{8, "source", protoreflect.StringKind, protoreflect.Optional, ""},
			{9, "owner", protoreflect.StringKind, protoreflect.Optional, ""},
			{10, "options", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.Plugin.OptionsEntry"},
			{11, "uid", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{12, "socket_id", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.SocketID"},
			{13, "no_check", protoreflect.BoolKind, protoreflect.Optional, ""},
		}},
		{"SocketID", []field{
			{1, "dev", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{2, "ino", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{3, "mtime", protoreflect.Int64Kind, protoreflect.Optional, ""},
			{4, "ctime", protoreflect.Int64Kind, protoreflect.Optional, ""},
			{5, "birth", protoreflect.Int64Kind, protoreflect.Optional, ""},
		}},
		{"ListRequest", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"ListResponse", []field{
			{1, "plugins", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.Plugin"},
		}},
		{"GetRequest", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "name", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "owner", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"WatchRequest", []field{
			{1, "since_revision", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{2, "type", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"Event", []field{
			{1, "revision", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{2, "kind", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "time", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{4, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
			{5, "error", protoreflect.StringKind, protoreflect.Optional, ""},
			{6, "plugins", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.Plugin"},
		}},
		{"RegisterPluginRequest", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "name", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "endpoint", protoreflect.StringKind, protoreflect.Optional, ""},
			{4, "versions", protoreflect.StringKind, protoreflect.Repeated, ""},
			{5, "owner", protoreflect.StringKind, protoreflect.Optional, ""},
			{6, "options", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.RegisterPluginRequest.OptionsEntry"},
			{7, "no_check", protoreflect.BoolKind, protoreflect.Optional, ""},
		}},
		{"RegisterPluginResponse", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
		}},
		{"DeregisterPluginRequest", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "name", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "owner", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"DeregisterPluginResponse", []field{
			{1, "plugins", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.Plugin"},
		}},
		{"StatusRequest", nil},
		{"StatusResponse", []field{
			{1, "version", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "started_at", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{3, "now", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{4, "unhealthy", protoreflect.StringKind, protoreflect.Optional, ""},
			{5, "ready", protoreflect.BoolKind, protoreflect.Optional, ""},
			{6, "dirs", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.DirStatus"},
			{7, "scan", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.ScanStatus"},
			{8, "types", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.TypeStatus"},
			{9, "unhealthy_plugins", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.UnhealthyPlugin"},
			{10, "pending", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.PendingDeregistration"},
			{11, "handlers", protoreflect.MessageKind, protoreflect.Repeated, "plugreg.v1.HandlerStatus"},
			{12, "state_file", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.StateFileStatus"},
			{13, "api", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.APIStatus"},
			{14, "publish", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.PublishStatus"},
		}},
		{"DirStatus", []field{
			{1, "path", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "stalled_since", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
		}},
		{"ScanStatus", []field{
			{1, "last_started", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{2, "last_took", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Duration"},
			{3, "running_since", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{4, "sockets", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{5, "scans", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{6, "last_tick", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
		}},
		{"TypeStatus", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "registered", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{3, "unhealthy", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{4, "pending_deregistrations", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{5, "rejections", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{6, "failures", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{7, "last_rejected_name", protoreflect.StringKind, protoreflect.Optional, ""},
			{8, "last_rejected_socket_path", protoreflect.StringKind, protoreflect.Optional, ""},
			{9, "last_rejection", protoreflect.StringKind, protoreflect.Optional, ""},
			{10, "last_rejected_at", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
		}},
		{"UnhealthyPlugin", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
			{2, "since", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
		}},
		{"PendingDeregistration", []field{
			{1, "plugin", protoreflect.MessageKind, protoreflect.Optional, "plugreg.v1.Plugin"},
			{2, "reason", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"HandlerStatus", []field{
			{1, "type", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "kind", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "target", protoreflect.StringKind, protoreflect.Optional, ""},
			{4, "available", protoreflect.BoolKind, protoreflect.Optional, ""},
			{5, "error", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"StateFileStatus", []field{
			{1, "path", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "size", protoreflect.Int64Kind, protoreflect.Optional, ""},
			{3, "last_save", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{4, "writes", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{5, "write_errors", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{6, "error", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
		{"APIStatus", []field{
			{1, "path", protoreflect.StringKind, protoreflect.Optional, ""},
			{2, "watchers", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{3, "max_watchers", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{4, "connections", protoreflect.Uint32Kind, protoreflect.Optional, ""},
			{5, "max_connections", protoreflect.Uint32Kind, protoreflect.Optional, ""},
		}},
		{"PublishStatus", []field{
			{1, "endpoints", protoreflect.StringKind, protoreflect.Repeated, ""},
			{2, "node", protoreflect.StringKind, protoreflect.Optional, ""},
			{3, "in_sync", protoreflect.BoolKind, protoreflect.Optional, ""},
			{4, "stale_since", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{5, "error", protoreflect.StringKind, protoreflect.Optional, ""},
			{6, "behind", protoreflect.Uint64Kind, protoreflect.Optional, ""},
			{7, "last_sync", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Timestamp"},
			{8, "lease", protoreflect.Int64Kind, protoreflect.Optional, ""},
			{9, "lease_ttl", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Duration"},
			{10, "lease_ttl_left", protoreflect.MessageKind, protoreflect.Optional, "google.protobuf.Duration"},
			{11, "lease_error", protoreflect.StringKind, protoreflect.Optional, ""},
			{12, "health", protoreflect.StringKind, protoreflect.Optional, ""},
		}},
	})
}

// checkMessages checks that file declares exactly the messages given, in
// package plugreg.v1, with their fields.
func checkMessages(t *testing.T, file protoreflect.FileDescriptor, messages []message) {
	t.Helper()
	if got, want := file.Messages().Len(), len(messages); got != want {
		t.Errorf("%s declares %d messages, want %d", file.Path(), got, want)
	}
	for _, tc := range messages {
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
