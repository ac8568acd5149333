module github.com/plugreg/plugreg

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/lmittmann/tint v1.2.1
	golang.org/x/net v0.60.0
	golang.org/x/sys v0.49.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
