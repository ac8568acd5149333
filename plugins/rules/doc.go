/*
Package rules holds what the agent accepts from a plugin, a handler or a
caller of its API, and how it bounds what it only shows.

  - What a plugin may report in GetInfo ([ValidateInfo], [ValidateName],
    and the limits [MaxVersions], [MaxVersionBytes], [MaxEndpointBytes]),
    what a handler may return ([ValidateAnnotations], [MaxAnnotations],
    [MaxAnnotationBytes]) and what a registration or deregistration through
    the API may carry ([ValidateAPIEndpoint], [ValidateOwner],
    [ValidateOptions], [ValidateDeregistration], [MaxOwnerBytes]);
    package plugins combines them for a whole registration
    (plugins.ValidateRegistration).
  - The one bound of text shown but not kept whole ([BoundText], [MaxText]).
  - The largest record of a plugin that keeps them ([MaxRecordBytes]),
    which bounds the state file and an API request.
  - The errors of a registration through the API ([ErrInvalid],
    [ErrRefused], [ErrLimit], [ErrDenied]), which the API turns into
    status codes.

It holds no state, reads no clock and does no I/O.
*/
package rules
