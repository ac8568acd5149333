package plugregv1_test

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"
)

// These tests pin the names and field numbers of plugreg.v1.Handler, the
// service that handlers serve and the agent calls: a rename or a
// renumbering in handler.proto would break every handler in the field.

func TestHandlerMethodNames(t *testing.T) {
	checkService(t, plugregv1.File_plugreg_v1_handler_proto, "Handler", []method{
		{"Validate", plugregv1.Handler_Validate_FullMethodName, "/plugreg.v1.Handler/Validate", "plugreg.v1.ValidateRequest", "plugreg.v1.ValidateResponse", false},
		{"Register", plugregv1.Handler_Register_FullMethodName, "/plugreg.v1.Handler/Register", "plugreg.v1.RegisterRequest", "plugreg.v1.RegisterResponse", false},
		{"DeRegister", plugregv1.Handler_DeRegister_FullMethodName, "/plugreg.v1.Handler/DeRegister", "plugreg.v1.DeRegisterRequest", "plugreg.v1.DeRegisterResponse", false},
	})
}

func TestHandlerMessages(t *testing.T) {
	checkMessages(t, plugregv1.File_plugreg_v1_handler_proto, []message{
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
	})
}
