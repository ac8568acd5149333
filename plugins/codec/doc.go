/*
Package codec holds the one encoding of a [plugins.Plugin] in each
format the agent speaks, so that a field of a plugin is carried on every
path or on none: a new field of Plugin is added here, once per format, and
TestPluginShapes (package plugins/handler) fails until it is.

  - JSON: [PluginJSON] ([ToJSON], [PluginJSON.Plugin]), versioned by its
    "schema" key ([JSONSchema]), is a plugin in the state file (package
    plugins/state), in `plugreg list -o json` and the other commands' JSON,
    in the fleet view's values (package plugins/fleet) and in an exec
    handler's input.
  - Protobuf: [ToProto] and [FromProto] convert a Plugin to and from the
    plugreg.v1 Plugin message, which the local API (List, Get, Watch,
    Register, Status) and the gRPC handlers (Validate, Register,
    DeRegister) carry, and the CLI reads.

It holds no state and does no I/O.
*/
package codec
