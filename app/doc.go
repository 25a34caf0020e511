// Package app is warden's GitHub App client side and the single access layer
// every GitHub API call goes through.
//
// An [App] holds the App's identity (its id and RSA private key) and hands out
// go-github clients: [App.AppClient] authenticates as the App itself (a
// short-lived RS256 JWT), [App.Installation] as one installation (an
// installation access token that ghinstallation creates and refreshes).
//
// Under ghinstallation, so that it sees every request including JWT calls and
// the creation of installation tokens, sits the access layer. Per installation
// (JWT calls are accounted to [AppInstallation], labelled "app") it:
//
//   - counts requests (Prometheus counter warden_github_requests_total and the
//     in-process [CallCounts] read with [App.Calls]);
//   - tracks the primary rate-limit budget from the x-ratelimit-* headers
//     ([App.Budget]) and does not send while that budget is exhausted: it waits
//     for the reset when that is within [Config.MaxWait], and otherwise fails
//     fast with a [*RateLimitedError];
//   - honours secondary rate limits (Retry-After) the same way;
//   - retries 5xx answers and transport errors with exponential backoff and
//     jitter, for idempotent methods only (never POST or PATCH).
//
// The package knows GitHub, not the backlog protocol.
package app
