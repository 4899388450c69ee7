"""The WebSocket endpoint (/ws): KataGo's JSON protocol over one connection, for KaTrain and other interactive
clients (`websocket`: handshake, auth, class, access line; `wsconnection`: one connection's queries; `actions`:
the KataGo actions it takes; `sendbuffer`: its bounded send side). Query admission is kgserve.admission's, as for
POST /analysis; this package imports nothing of kgserve.http."""
