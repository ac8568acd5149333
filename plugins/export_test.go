package plugins

// CheckPlugin is checkPlugin, for the external tests.
var CheckPlugin = checkPlugin
