package register

// The texts a refused plugin is told, in NotifyRegistrationStatus(false,
// MSG), are the kubelet's, word for word, so that a plugin, or a person
// reading its log, reads the same whichever of the two registered it. The
// kubelet's plugin manager (pkg/kubelet/pluginmanager/operationexecutor,
// operation_generator.go) sends:
//
//	"RegisterPlugin error -- no handler registered for plugin type: %s at socket %s"
//	"RegisterPlugin error -- plugin validation failed with err: %v"
//	"RegisterPlugin error -- plugin registration failed with err: %v"
//
// These functions are the only place these words are written; the texts
// are bounded (rules.BoundText) where they are sent.

// kubeletPrefix begins each message of a refused registration.
const kubeletPrefix = "RegisterPlugin error -- "

// noHandlerMsg is the message of a plugin of type typ that no handler
// takes, at the registration socket path; for an API registration, which
// has no socket, path is "" and the message ends after the type.
func noHandlerMsg(typ, path string) string {
	msg := kubeletPrefix + "no handler registered for plugin type: " + typ
	if path != "" {
		msg += " at socket " + path
	}
	return msg
}

// validationFailedMsg is the message of a plugin that failed validation
// (its reply, the agent's checks or its handler's Validate), because of
// cause.
func validationFailedMsg(cause string) string {
	return kubeletPrefix + "plugin validation failed with err: " + cause
}

// registrationFailedMsg is the message of a plugin whose handler's
// Register failed, because of cause.
func registrationFailedMsg(cause string) string {
	return kubeletPrefix + "plugin registration failed with err: " + cause
}
