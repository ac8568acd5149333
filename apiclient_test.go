package main

import plugregv1 "github.com/plugreg/plugreg/proto/plugreg/v1"

// apiClient has the methods of the generated client.
var _ plugregv1.RegistryClient = apiClient{}
