package register

import "errors"

// isRejection reports whether err is a rejection the plugin was told of.
func isRejection(err error) bool {
	_, ok := errors.AsType[*RejectError](err)
	return ok
}
