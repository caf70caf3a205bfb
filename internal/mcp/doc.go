// Package mcp is the protocol core shared by every MCP endpoint of relayroom: JSON-RPC 2.0
// over Streamable HTTP, served statelessly (no session ids, no server-initiated streams),
// in both protocol eras (the initialize handshake of 2024-11-05 … 2025-11-25 and the
// per-request metadata of 2026-07-28).
//
// An endpoint is data: a toolset's tools (name, schema, annotations, handler), how a
// request's credential becomes the caller's scope, and which wire format shapes results
// and errors. NewHandler turns that data into an http.Handler. The package imports no
// toolset; toolsets import it.
//
// The rules implemented here, and every decision taken where the specs are silent, are
// written down in docs/mcp-core.md.
package mcp
