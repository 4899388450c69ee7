"""The WebSocket endpoint (/ws): KataGo's JSON protocol over one connection, for KaTrain and other interactive
clients (`websocket`: handshake, auth, class, access line; `wsconnection`: one connection's queries)."""
