"""The engine client wing: KataGo analysis-engine subprocesses behind the `EngineClient` contract.

No web framework here; kgserve's HTTP and WebSocket layers and kgbench's `transport=direct` all drive it.
"""
