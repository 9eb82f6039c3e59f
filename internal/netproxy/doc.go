// Package netproxy is a TCP proxy for tests that stands between a client
// and a real server and misbehaves on demand, as a network would.
//
// # Modes
//
// A Proxy listens on 127.0.0.1 and forwards each connection to its target.
// SetMode switches, at any time and for every connection:
//
//   - Pass forwards bytes both ways.
//   - Refuse resets every open connection and every new one as soon as it
//     is accepted (the client sees "connection reset", not a refused
//     connect: the listening port stays the same).
//   - Hold keeps connections open and forwards nothing either way: bytes
//     read are held in the proxy, the rest wait in the kernel's buffers.
//     New connections are accepted and held likewise. This is a network
//     partition.
//
// Break resets every open connection, dropping what it holds, and
// switches to Pass: a client's connection breaks, its next one passes.
//
// From Hold, Pass releases the held bytes in order, as TCP retransmission
// would once a partition heals: a query sent during the hold completes
// after it, unless the client gave up first. Refuse drops them with the
// connections.
//
// # Cuts
//
// CutOn arms a one-shot hook on the bytes going from client to server:
// the first connection whose stream contains the pattern is cut there,
// either before the pattern is forwarded (CutBefore: the server never sees
// it) or just after (CutAfter: the server gets it, the client never gets
// the answer). With the PostgreSQL Query message of a COMMIT as pattern,
// these are "commit not sent" and "commit sent, answer lost". CutOnThen
// also switches the proxy's mode at the cut, before the client learns of
// it: with Refuse, the database is out of reach from the moment the
// client would look for the commit's outcome.
//
// HoldOn arms the same kind of hook to switch the proxy to Hold the moment
// a client sends the pattern, once the bytes that carry it have been
// forwarded: the client is frozen at a chosen point, with what it holds
// on the server (a lock, an open transaction) held there.
package netproxy
